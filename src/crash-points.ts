/**
 * Places where a test can kill the process to prove that nothing committed is lost and nothing is paid twice:
 * `WEBDATA_CRASH_AT=<point>[:<n>]` sends SIGKILL to this process the n-th time (default the first) it reaches
 * the point. Unset (always, outside tests), a crash point costs one comparison.
 */
export type CrashPoint =
  /** Inside the page's transaction, after its rows were written, before the commit. */
  | 'page-transaction'
  /** After a file sink's synchronous write, before its checkpoint. */
  | 'file-before-checkpoint'
  /** After one sink committed a page, before the next sink got it. */
  | 'between-sinks'
  /** After a page's state committed, before any sink outside its transaction got it. */
  | 'after-commit'
  /** After a run's end was recorded and its notification recorded pending, before it was sent. */
  | 'notification-claimed';

const setting = process.env.WEBDATA_CRASH_AT;
const [target, countText] = setting ? setting.split(':') : [];
// The count is the process's, not a thread's: the commit thread reaches points too, and takes this one along.
let remaining = new Int32Array(new SharedArrayBuffer(4));
remaining[0] = countText ? Number(countText) : 1;

export function crashPoint(point: CrashPoint): void {
  if (target !== point) return;
  if (Atomics.sub(remaining, 0, 1) === 1) process.kill(process.pid, 'SIGKILL');
}

/** The count, for a thread that reaches points of this process (`countCrashesWith` there). */
export const crashCount = (): SharedArrayBuffer => remaining.buffer as SharedArrayBuffer;

export function countCrashesWith(count: SharedArrayBuffer): void {
  remaining = new Int32Array(count);
}
