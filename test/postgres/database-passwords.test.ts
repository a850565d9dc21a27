import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { describePostgres, testDatabase } from './pg.ts';

const PASSWORD = 'pg-secret-6a1f';
const postgresSink = (url?: string) => ({ sinks: [{ type: 'postgres', table: 'results', ...(url === undefined ? {} : { url }) }] });
/** The environment of a user with a password in PGPASSWORD and no database chosen in it: each test says the rest. */
const withPassword = (simUrl: string, more: Record<string, string> = {}) => ({
  ...envFor(simUrl),
  PGPASSWORD: PASSWORD,
  DATABASE_URL: '',
  WEBDATA_STATE_URL: '',
  WEBDATA_ALLOWED_DB_HOSTS: '',
  ...more,
});

/**
 * A server that asks for a password as PostgreSQL does (cleartext) and keeps what it is sent, then refuses it: where
 * a password would go. It listens on every interface and is reached by an address that is not loopback (this
 * machine's own, or 0.0.0.0, which Linux connects to this machine): a host as a pipeline file might name. Given
 * `socket`, it listens there instead: a socket directory's `.s.PGSQL.<port>`, as a local user could place one.
 */
async function passwordCatcher(socket?: string) {
  const received: string[] = [];
  /** The address each password was sent to (the server's end of the connection): which host it went to. */
  const receivedAt: string[] = [];
  let connections = 0;
  const server = createServer((connection) => {
    connections++;
    let asked = false;
    connection.on('error', () => undefined);
    connection.on('data', (chunk: Buffer) => {
      if (!asked) {
        asked = true; // the startup message: ask for the password in clear text (AuthenticationCleartextPassword)
        connection.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3]));
        return;
      }
      if (chunk[0] !== 0x70) return; // 'p': a PasswordMessage, the password NUL-terminated after the length
      received.push(chunk.subarray(5, chunk.indexOf(0, 5)).toString());
      receivedAt.push(connection.localAddress ?? socket ?? '');
      const fields = Buffer.from('SFATAL\0C28P01\0Mpassword authentication failed\0\0');
      const header = Buffer.from([0x45, 0, 0, 0, 0]);
      header.writeInt32BE(fields.length + 4, 1);
      connection.end(Buffer.concat([header, fields]));
    });
  });
  await new Promise<void>((resolve) => (socket === undefined ? server.listen(0, '0.0.0.0', resolve) : server.listen(socket, resolve)));
  const own = Object.values(networkInterfaces())
    .flat()
    .find((address) => address !== undefined && address.family === 'IPv4' && !address.internal);
  const host = own?.address ?? '0.0.0.0';
  const port = socket === undefined ? (server.address() as { port: number }).port : 5432;
  return {
    host,
    port,
    url: `postgres://etl@${host}:${port}/x`,
    received,
    receivedAt,
    connections: () => connections,
    [Symbol.asyncDispose]: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('database passwords: where PGPASSWORD may go', () => {
  it('6a: a host named by a pipeline file (a sink url, state.url) is refused unless loopback or in WEBDATA_ALLOWED_DB_HOSTS (exit 2, before any connection or request): by run, runs and status', async () => {
    await using sim = await simulator();
    await using catcher = await passwordCatcher();
    using dir = workdir();
    const env = withPassword(sim.url);
    const inSink = config(dir.dir, postgresSink(catcher.url));
    const inState = config(dir.dir, { name: 'state-remote', state: { url: catcher.url } });
    for (const args of [['run', inSink], ['run', inState], ['runs', inSink], ['status', inState]]) {
      const result = await cli(args, { cwd: dir.dir, env });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(`${catcher.host} is named by the pipeline`);
      expect(result.stderr).toMatch(/WEBDATA_ALLOWED_DB_HOSTS/);
      expect(result.stdout + result.stderr).not.toContain(PASSWORD);
    }
    expect(catcher.connections()).toBe(0);
    expect(sim.stats().requests).toBe(0);

    // Listed, the host is the user's choice: the password goes there (and this server refuses it: exit 2, saying so).
    const allowed = await cli(['run', inSink], { cwd: dir.dir, env: { ...env, WEBDATA_ALLOWED_DB_HOSTS: `db.example.com, ${catcher.host}` } });
    expect(allowed.code, allowed.stderr).toBe(2);
    expect(allowed.stderr).toMatch(/password authentication failed/);
    expect(catcher.received).toEqual([PASSWORD]);
    expect(sim.stats().requests).toBe(0);
  });

  it('6a: a host the user names (DATABASE_URL, --state, a database argument) is used with nothing set; WEBDATA_ALLOWED_DB_HOSTS, when set, holds those too', async () => {
    await using sim = await simulator();
    await using catcher = await passwordCatcher();
    using dir = workdir();
    const file = config(dir.dir, postgresSink());
    const byEnv = await cli(['run', file], { cwd: dir.dir, env: withPassword(sim.url, { DATABASE_URL: catcher.url }) });
    expect(byEnv.stderr).toMatch(/password authentication failed/);
    const byFlag = await cli(['export', catcher.url, '--report', 'spend'], { cwd: dir.dir, env: withPassword(sim.url) });
    expect(byFlag.stderr).toMatch(/password authentication failed/);
    expect(catcher.received).toEqual([PASSWORD, PASSWORD]);

    const listed = { WEBDATA_ALLOWED_DB_HOSTS: 'db.example.com' };
    for (const [args, more] of [
      [['run', file], { DATABASE_URL: catcher.url }],
      [['run', config(dir.dir), '--state', catcher.url], {}],
      [['export', catcher.url, '--report', 'spend'], {}],
    ] as const) {
      const result = await cli([...args], { cwd: dir.dir, env: withPassword(sim.url, { ...listed, ...more }) });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`${catcher.host} is not among WEBDATA_ALLOWED_DB_HOSTS (db.example.com)`);
    }
    expect(catcher.connections()).toBe(2);
    expect(sim.stats().requests).toBe(0);
  });
});

describe('database passwords: the host node-postgres connects to is the one checked', () => {
  const scheduled = (url: string) => ({ ...postgresSink(url), schedule: { cron: '0 6 * * *', timezone: 'UTC' } });

  it('38.1: a second ?host= (or an empty first) in a pipeline file\'s url: run, worker, runs, status exit 2 naming ?host=, the password sent nowhere, with or without WEBDATA_ALLOWED_DB_HOSTS', async () => {
    await using sim = await simulator();
    await using catcher = await passwordCatcher();
    using dir = workdir();
    // The check read the first ?host= (loopback, allowed), node-postgres connected to the last: the catcher.
    const outcomes: { command: string; code: number | null; passwordTo: string[]; named: boolean; leaked: boolean }[] = [];
    for (const url of [`postgres://etl@127.0.0.1:${catcher.port}/x?host=127.0.0.1&host=${catcher.host}`, `postgres://etl@127.0.0.1:${catcher.port}/x?host=&host=${catcher.host}`]) {
      for (const list of ['', 'db.example.com']) {
        const env = withPassword(sim.url, { WEBDATA_ALLOWED_DB_HOSTS: list });
        const cases: [string[], RegExp][] = [
          [['run', config(dir.dir, postgresSink(url))], /sinks\.0\.url: .*\?host= /],
          [['worker', config(dir.dir, { name: 'scheduled', ...scheduled(url) })], /sinks\.0\.url: .*\?host= /],
          [['runs', config(dir.dir, postgresSink(url))], /sinks\.0\.url: .*\?host= /],
          [['status', config(dir.dir, { name: 'state-remote', state: { url } })], /state\.url: .*\?host= /],
        ];
        for (const [args, message] of cases) {
          const before = catcher.receivedAt.length;
          const result = await cli(args, { cwd: dir.dir, env });
          const command = `${args[0]} ${url.slice(url.indexOf('?'))}${list ? ` (WEBDATA_ALLOWED_DB_HOSTS=${list})` : ''}`;
          outcomes.push({ command, code: result.code, passwordTo: catcher.receivedAt.slice(before), named: message.test(result.stderr), leaked: (result.stdout + result.stderr).includes(PASSWORD) });
        }
      }
    }
    // Every case at once, so that a failure shows each command that sent the password, and where.
    expect(outcomes).toEqual(outcomes.map(({ command }) => ({ command, code: 2, passwordTo: [], named: true, leaked: false })));
    expect(catcher.connections()).toBe(0);
    expect(sim.stats().requests).toBe(0);
  });

  it('38.1: a second or empty ?port= in a pipeline file\'s url: exit 2 naming ?port=', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const env = withPassword(sim.url);
    for (const query of ['?port=5432&port=5433', '?port=', '?port=&port=5433']) {
      const url = `postgres://etl@127.0.0.1/x${query}`;
      for (const [args, message] of [
        [['run', config(dir.dir, postgresSink(url))], /sinks\.0\.url: .*\?port= /],
        [['status', config(dir.dir, { name: 'state-port', state: { url } })], /state\.url: .*\?port= /],
      ] as const) {
        const result = await cli([...args], { cwd: dir.dir, env });
        expect(result.code, `${args[0]} ${url}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toMatch(message);
      }
    }
    expect(sim.stats().requests).toBe(0);
  });

  it('38.1: a url the user names (DATABASE_URL) with two ?host= is held to WEBDATA_ALLOWED_DB_HOSTS by the host node-postgres takes, the last', async () => {
    await using sim = await simulator();
    await using catcher = await passwordCatcher();
    using dir = workdir();
    const url = `postgres://etl@127.0.0.1:${catcher.port}/x?host=127.0.0.1&host=${catcher.host}`;
    const result = await cli(['run', config(dir.dir, postgresSink())], { cwd: dir.dir, env: withPassword(sim.url, { DATABASE_URL: url, WEBDATA_ALLOWED_DB_HOSTS: 'db.example.com' }) });
    expect(catcher.receivedAt, 'where run sent the password').toEqual([]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(`${catcher.host} is not among WEBDATA_ALLOWED_DB_HOSTS (db.example.com)`);
    expect(sim.stats().requests).toBe(0);

    // Nothing set: the user's url goes where node-postgres takes it, as they wrote it.
    await cli(['run', config(dir.dir, postgresSink())], { cwd: dir.dir, env: withPassword(sim.url, { DATABASE_URL: url }) });
    expect(catcher.receivedAt).toEqual([catcher.host === '0.0.0.0' ? '127.0.0.1' : catcher.host]);
  });

  it('38.1: a socket directory a pipeline file names (?host=/dir) is used only when owned by the user or root and not writable by others, or listed', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const open = mkdtempSync(join(tmpdir(), 'webdata-open-sockets-'));
    const theirs = mkdtempSync(join(tmpdir(), 'webdata-their-sockets-'));
    const own = mkdtempSync(join(tmpdir(), 'webdata-own-sockets-'));
    try {
      chmodSync(open, 0o1777); // like /tmp: anyone may place a socket in it (the sticky bit stops only renames)
      // Another user's directory: only root can make one here (chown); as another user, the world-writable case stands.
      const asRoot = process.getuid?.() === 0;
      if (asRoot) chownSync(theirs, 65534, 65534);
      await using planted = await passwordCatcher(join(open, '.s.PGSQL.5432'));
      const env = withPassword(sim.url);
      const refused = [open, ...(asRoot ? [theirs] : [])];
      for (const sockets of refused) {
        for (const url of [`postgres://etl@localhost:5432/x?host=${encodeURIComponent(sockets)}`, `postgres://etl@${encodeURIComponent(sockets)}:5432/x`]) {
          for (const [args, path] of [
            [['run', config(dir.dir, postgresSink(url))], 'postgres.url'],
            [['status', config(dir.dir, { name: 'state-socket', state: { url } })], 'state.url'],
          ] as const) {
            const result = await cli([...args], { cwd: dir.dir, env });
            expect(planted.received, `what ${args[0]} sent to the socket planted in ${sockets}`).toEqual([]);
            expect(result.code, `${args[0]} ${url}: ${result.stderr}`).toBe(2);
            expect(result.stderr).toContain(`${path}: the socket directory ${sockets} `);
            expect(result.stdout + result.stderr).not.toContain(PASSWORD);
          }
        }
      }
      expect(sim.stats().requests).toBe(0);

      // The user's own private directory is taken (no server in it: cannot be reached), and a listed one too.
      const ownUrl = `postgres://etl@localhost:5432/x?host=${encodeURIComponent(own)}`;
      const mine = await cli(['status', config(dir.dir, { name: 'state-own', state: { url: ownUrl } })], { cwd: dir.dir, env });
      expect(mine.code, mine.stderr).toBe(75);
      const listed = await cli(['status', config(dir.dir, { name: 'state-listed', state: { url: `postgres://etl@localhost:5432/x?host=${encodeURIComponent(open)}` } })], {
        cwd: dir.dir,
        env: { ...env, WEBDATA_ALLOWED_DB_HOSTS: open },
      });
      expect(listed.stderr).toMatch(/password authentication failed/);
      expect(planted.received).toEqual([PASSWORD]);
    } finally {
      for (const made of [open, theirs, own]) rmSync(made, { recursive: true, force: true });
    }
  });
});

describePostgres('database passwords: never in a file or on the command line', () => {
  it('6a: loopback works with nothing set, and with a list that does not name it', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, postgresSink(db.url));
      for (const list of ['', 'db.example.com']) {
        const result = await cli(['run', file], { cwd: dir.dir, env: withPassword(sim.url, { WEBDATA_ALLOWED_DB_HOSTS: list }) });
        expect(result.code, result.stderr).toBe(0);
      }
    } finally {
      await db.drop();
    }
  });

  it('6b: ?password= in a URL is refused as a password in its user part: a file url, --state, the database argument of export, report and runs, --database-url (exit 2, never shown)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      // The test cluster trusts loopback: before, each of these connected with the password and went on.
      const url = `${db.url}?password=hunter2`;
      const cases: [string[], RegExp][] = [
        [['run', config(dir.dir, postgresSink(url))], /sinks\.0\.url: must not carry a password .*PGPASSWORD/],
        [['run', config(dir.dir, { name: 'state-url', state: { url } })], /state\.url: must not carry a password/],
        [['run', config(dir.dir), '--state', url], /--state must not carry a password/],
        [['export', url, '--report', 'spend'], /must not carry a password/],
        [['report', url, '--out', 'report.html'], /must not carry a password/],
        [['runs', url], /must not carry a password/],
        [['runs', '--database-url', url], /must not carry a password/],
        [['export', `${db.url}?sslmode=disable&Password=hunter2`, '--report', 'spend'], /must not carry a password/],
        // Not a URL at all (a port past 65535): named without its parameters.
        [['export', 'postgres://u@127.0.0.1:99999/x?password=hunter2', '--report', 'spend'], /127\.0\.0\.1:99999\/x is not a PostgreSQL URL/],
      ];
      for (const [args, message] of cases) {
        const result = await cli(args, { cwd: dir.dir, env: envFor(sim.url) });
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toMatch(message);
        expect(result.stdout + result.stderr).not.toContain('hunter2');
      }
      expect(sim.stats().requests).toBe(0);
    } finally {
      await db.drop();
    }
  });

  it('6c: runs with postgres://user:password@… as its argument is refused (exit 2, never shown)', async () => {
    using dir = workdir();
    const db = await testDatabase();
    try {
      const result = await cli(['runs', db.url.replace('postgres@', 'postgres:hunter2@')], { cwd: dir.dir });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toMatch(/must not carry a password .*PGPASSWORD/);
      expect(result.stdout + result.stderr).not.toContain('hunter2');
    } finally {
      await db.drop();
    }
  });
});
