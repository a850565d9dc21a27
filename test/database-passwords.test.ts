import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { simulator } from './helpers.ts';
import { cli, config, envFor } from './cli-helpers.ts';
import { workdir } from './pipeline-helpers.ts';
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
 * machine's own, or 0.0.0.0, which Linux connects to this machine): a host as a pipeline file might name.
 */
async function passwordCatcher() {
  const received: string[] = [];
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    let asked = false;
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      if (!asked) {
        asked = true; // the startup message: ask for the password in clear text (AuthenticationCleartextPassword)
        socket.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3]));
        return;
      }
      if (chunk[0] !== 0x70) return; // 'p': a PasswordMessage, the password NUL-terminated after the length
      received.push(chunk.subarray(5, chunk.indexOf(0, 5)).toString());
      const fields = Buffer.from('SFATAL\0C28P01\0Mpassword authentication failed\0\0');
      const header = Buffer.from([0x45, 0, 0, 0, 0]);
      header.writeInt32BE(fields.length + 4, 1);
      socket.end(Buffer.concat([header, fields]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  const own = Object.values(networkInterfaces())
    .flat()
    .find((address) => address !== undefined && address.family === 'IPv4' && !address.internal);
  const host = own?.address ?? '0.0.0.0';
  const port = (server.address() as { port: number }).port;
  return {
    host,
    url: `postgres://etl@${host}:${port}/x`,
    received,
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
