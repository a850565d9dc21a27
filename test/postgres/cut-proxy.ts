import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy to the database at `url` (node:net), for the connections a test sends through it: `mute` stops what the
 * server says from reaching the client on every connection open now (statements still go through and run; connections
 * opened later are heard), `muteOn` the one connection that sends a given statement, `cut` ends every connection
 * through it.
 */
export async function cutProxy(url: string) {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  const muted = new WeakSet<Socket>();
  const watches: { text: string; found: (cut: () => void) => void }[] = [];
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    // What the client sent lately, so that a statement's text split between two chunks is still found.
    let sent = '';
    client.on('data', (data: Buffer) => {
      sent = (sent + data.toString('latin1')).slice(-8192);
      const watch = watches.find(({ text }) => sent.includes(text));
      if (watch) {
        watches.splice(watches.indexOf(watch), 1);
        muted.add(client);
        watch.found(() => client.destroy());
      }
      upstream.write(data);
    });
    upstream.on('data', (data) => void (muted.has(client) || client.write(data)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const through = new URL(url);
  through.hostname = '127.0.0.1';
  through.port = String((server.address() as { port: number }).port);
  return {
    url: through.toString(),
    mute: () => sockets.forEach((socket) => muted.add(socket)),
    /**
     * Mutes the connection that next sends `text` (a statement's), from that moment: the statement still reaches the
     * server and runs. Resolves then, with what cuts that connection alone.
     */
    muteOn: (text: string) => new Promise<() => void>((found) => void watches.push({ text, found })),
    cut: () => sockets.forEach((socket) => socket.destroy()),
    [Symbol.asyncDispose]: () =>
      new Promise<void>((resolve) => {
        sockets.forEach((socket) => socket.destroy());
        server.close(() => resolve());
      }),
  };
}

/** The sessions of the test's database waiting for a lock, oldest first. */
export async function lockWaiters(sql: (text: string) => Promise<Record<string, unknown>[]>): Promise<number[]> {
  return (await sql(`SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() ORDER BY query_start`)).map((row) => row.pid as number);
}

/** Waits (bounded) until `check` holds. */
export async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
