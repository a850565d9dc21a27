import { quoteIdentifier } from '../sql-identifier.ts';

/*
 * Every statement a distributed run sends (but pg-boss's own, and a page's: state/postgres/page-statement.ts), by
 * name and by concern, as SQL of the quoted state schema `s` (the pg-boss `plans.ts` way): a reader sees what the run's
 * workers ask of the database in one place. Parameters are always bound ($n); identifiers are quoted where they are
 * made (sql-identifier.ts).
 */

/*
 * Who is at work in a distributed run, as SQL conditions on a `workers` row. Two signs, both on the database's side:
 * a worker's liveness lock (an advisory lock on a session of its own, gone with its process's connection) and its
 * beat (`heartbeat_at`, by the database's clock). A server restart takes every session, and so every lock, with it;
 * while it is down nobody can beat. So a lock missing since a restart says nothing of the process, and time the server
 * was down does not count against a beat: a live worker gets the stale limit, from the server's start, to come back.
 */

/**
 * A beat within `staleSeconds` (a parameter) of the server's time up: since the last beat, or since the server started
 * if it started after it. Right after a restart, every worker's beat is fresh for that long.
 */
function beatFresh(staleSeconds: string): string {
  return `greatest(heartbeat_at, pg_postmaster_start_time()) > clock_timestamp() - ${staleSeconds} * interval '1 second'`;
}

/** Its liveness lock (named `prefix` and its id, a parameter) held by a session: pg_locks shows a bigint advisory key as its two halves. */
function lockHeld(prefix: string): string {
  return `EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                   AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(${prefix} || worker_id, 0))`;
}

/** At work now, as `status` shows it: not stopped, its lock held and a fresh beat. */
function workerAlive(staleSeconds: string, prefix: string): string {
  return `stopped_at IS NULL AND ${beatFresh(staleSeconds)} AND ${lockHeld(prefix)}`;
}

/**
 * May be at work, so that its run must not be planned again, its queue deleted or the worker taken for dead: its lock
 * held (even frozen: its beats will say), or — its session lost with a restart (its last beat before the server's
 * start), not marked dead — within the stale limit of the server's start, while it reconnects (each beat opens its
 * session again before it writes the beat). A lock gone while the server stayed up went with its process.
 */
function workerMayBeAlive(staleSeconds: string, prefix: string): string {
  return `stopped_at IS NULL AND (${lockHeld(prefix)}
            OR (status <> 'dead' AND heartbeat_at < pg_postmaster_start_time() AND ${beatFresh(staleSeconds)}))`;
}

/**
 * Marks the workers of a run ($1) that are not stopped nor dead yet, and meet `dead` (on their row, parameters from
 * $2), as dead, and counts what they held reserved as spent and uncertain: their requests may have been sent and
 * charged, so those credits never return to the budget. One statement, so that a worker is either still alive for its
 * own commits or dead with its reservations moved, never both. Answers how many workers it marked.
 */
function expireWorkers(s: string, dead: string): string {
  // Locked in one order (workers by id, then the run), as every statement on these rows does, so that none deadlocks.
  return `
    WITH stale AS (
      SELECT worker_id, reserved FROM ${s}.workers
       WHERE run_id = $1 AND stopped_at IS NULL AND status <> 'dead' AND ${dead}
       ORDER BY worker_id
         FOR UPDATE
    ), dead AS (
      UPDATE ${s}.workers w SET status = 'dead', reserved = 0, credits = w.credits + stale.reserved
        FROM stale WHERE w.run_id = $1 AND w.worker_id = stale.worker_id
      RETURNING stale.reserved
    ), moved AS (
      UPDATE ${s}.run_limits l SET reserved = l.reserved - held.total, spent = l.spent + held.total, uncertain = l.uncertain + held.total
        FROM (SELECT sum(reserved) AS total FROM dead) held
       WHERE l.run_id = $1 AND held.total > 0
    )
    SELECT count(*) AS marked FROM dead`;
}

/** Who may be at work, and taking for dead those who cannot be: $1 the run, $2 the stale limit in seconds, $3 the liveness locks' prefix. */
export function livenessStatements(s: string) {
  return {
    /** How many workers of a run may be at work (`workerMayBeAlive`). */
    workersAtWork: `SELECT COUNT(*)::int AS n FROM ${s}.workers WHERE run_id = $1 AND ${workerMayBeAlive('$2', '$3')}`,
    /** Workers whose beat is older than the stale limit of the server's time up (by the database's clock: `beatFresh`). */
    expireDeadWorkers: expireWorkers(s, `NOT (${beatFresh('$2')})`),
    /** Every worker that cannot be at work (`workerMayBeAlive`). */
    expireGoneWorkers: expireWorkers(s, `NOT (${workerMayBeAlive('$2', '$3')})`),
  } as const;
}

/** Planning a run for its workers ($1 the run). */
export function planStatements(s: string) {
  return {
    /** A resume that retries failed series queues them again. */
    retryFailed: `UPDATE ${s}.series SET status = 'active', reason = NULL, error = NULL, error_kind = NULL WHERE run_id = $1 AND status = 'ended' AND reason = 'failed'`,
    /** Whether any of the run's series is over (a resume): planning then asks which, a batch at a time. */
    anySeriesOver: `SELECT EXISTS (SELECT 1 FROM ${s}.series WHERE run_id = $1 AND status = 'ended') AS over`,
    /** Which of these series ($2) of the run are over: they get no job. */
    seriesOverOf: `SELECT series_id FROM ${s}.series WHERE run_id = $1 AND status = 'ended' AND series_id = ANY($2::text[])`,
    // The rate is left for the first worker's pacer to write (it knows the margin it paces under); no worker is alive,
    // so reservations left are a dead one's: counted as spent already by their expiry, or given back here.
    /** The run's shared limits ($2 the budget, $3 the spend before), and no stop. */
    planLimits: `INSERT INTO ${s}.run_limits (run_id, planned, budget, spent) VALUES ($1, true, $2, $3)
     ON CONFLICT (run_id) DO UPDATE SET planned = true, budget = excluded.budget, stop_reason = NULL, stop_message = NULL, interval_ms = 0`,
    // A pool's keys start each invocation afresh, as in one process: rates learned again, retirements and shares anew.
    /** The run's keys' rows, gone: the workers write them again as they join. */
    planKeys: `DELETE FROM ${s}.run_key_limits WHERE run_id = $1`,
  } as const;
}

/** A worker's side of the run's queue ($1 the run). */
export function queueStatements(s: string) {
  return {
    /** How many of the run's series have ended: the run is done for a worker once they all have. */
    seriesEnded: `SELECT COUNT(*)::int AS n FROM ${s}.series WHERE run_id = $1 AND status = 'ended'`,
    /** Tells the run's workers that a series ended, at the commit of the transaction it is in ($1 the channel). */
    notify: `SELECT pg_notify($1, '')`,
    /** The run's series that have ended, and those a worker is paging (a page committed, not ended). */
    seriesByState: `SELECT COUNT(*) FILTER (WHERE status = 'ended')::int AS ended, COUNT(*) FILTER (WHERE status = 'active')::int AS active
                      FROM ${s}.series WHERE run_id = $1`,
  } as const;
}

/** The run's figures as a statement answers them, with the row as it stood when nothing was changed. */
const FIGURES = (changed: string) => `
  SELECT CASE WHEN ${changed}.run_id IS NULL THEN l.spent ELSE ${changed}.spent END AS spent,
         CASE WHEN ${changed}.run_id IS NULL THEN l.uncertain ELSE ${changed}.uncertain END AS uncertain,
         CASE WHEN ${changed}.run_id IS NULL THEN l.reserved ELSE ${changed}.reserved END AS reserved,
         l.budget, ${changed}.run_id IS NOT NULL AS changed`;

/** The shared credit meter: $1 the run, $2 the worker. */
export function meterStatements(s: string) {
  return {
    refresh: `SELECT budget, spent, uncertain, reserved FROM ${s}.run_limits WHERE run_id = $1`,
    // The worker's row is locked first (as every statement here does: workers, then the run), so that a worker
    // being marked dead either sees this reservation on its row, or this reservation sees it dead and takes nothing.
    reserve: `
      WITH alive AS (
        SELECT 1 FROM ${s}.workers WHERE run_id = $1 AND worker_id = $2 AND status <> 'dead' FOR UPDATE
      ), taken AS (
        UPDATE ${s}.run_limits SET reserved = reserved + $3
         WHERE run_id = $1 AND spent + reserved + $3 <= budget AND EXISTS (SELECT 1 FROM alive)
        RETURNING run_id, spent, uncertain, reserved
      ), mine AS (
        UPDATE ${s}.workers SET reserved = reserved + $3 WHERE run_id = $1 AND worker_id = $2 AND EXISTS (SELECT 1 FROM taken)
      )
      ${FIGURES('taken')}, EXISTS (SELECT 1 FROM alive) AS alive
        FROM ${s}.run_limits l LEFT JOIN taken ON true WHERE l.run_id = $1`,
    // Moves a batch of settled reservations ($3 held, $4 spent of which $5 uncertain) — unless the worker was marked
    // dead meanwhile: its reservations were then already counted as spent, and counting them again would count twice.
    settle: `
      WITH mine AS (
        UPDATE ${s}.workers SET reserved = reserved - $3, credits = credits + $4
         WHERE run_id = $1 AND worker_id = $2 AND status <> 'dead'
        RETURNING 1
      ), run AS (
        UPDATE ${s}.run_limits SET reserved = reserved - $3, spent = spent + $4, uncertain = uncertain + $5
         WHERE run_id = $1 AND EXISTS (SELECT 1 FROM mine)
        RETURNING run_id, spent, uncertain, reserved
      )
      ${FIGURES('run')}, EXISTS (SELECT 1 FROM mine) AS alive
        FROM ${s}.run_limits l LEFT JOIN run ON true WHERE l.run_id = $1`,
  } as const;
}

/**
 * `what` (an aggregate) of the 429s an acquire carries ($3 their send times, $4 the intervals they were paced under)
 * that were paced no faster than the row's interval: correlated with the row being updated, so that a concurrent
 * change of the interval is seen as the update sees it.
 */
function countedRejected(what: string): string {
  return `(SELECT ${what} FROM unnest($3::float8[], $4::float8[]) AS r(at, paced) WHERE r.paced IS NULL OR r.paced >= interval_ms - 0.001)`;
}

/** What a slot's statement sets on its row: the next slot, and the answers it carries ($2 accepted, $3 and $4 the 429s). */
const SLOT_SET = `next_at = GREATEST(next_at, clock_timestamp(), paused_until) + interval_ms * interval '1 millisecond',
                     accepted = accepted + $2, rejected = rejected + ${countedRejected('count(*)')},
                     rejected_sent_at = GREATEST(rejected_sent_at, to_timestamp(${countedRejected('max(r.at)')} / 1000))`;

/** What a slot's statement answers: the slot, the run's stop, a key's retirements, the run's answers. */
function slotReturning(stop: string, retired: string): string {
  return `interval_ms,
                     extract(epoch FROM next_at - clock_timestamp()) * 1000 - interval_ms AS wait_ms,
                     extract(epoch FROM next_at) * 1000 - interval_ms AS slot_epoch_ms,
                     ${stop}, ${retired}, accepted, rejected,
                     extract(epoch FROM rejected_sent_at) * 1000 AS rejected_sent_epoch_ms, ${countedRejected('count(*)')}::int AS counted_rejected`;
}

/**
 * The run's slot (`pacerStatements(s).acquire`, $1 to $4) carrying the shared meter's business of this worker ($5), so
 * that a page costs one round trip on the run's row where it cost three (docs/distributed.md#sizing-a-fleet-and-its-database):
 * the reservations that settled since its last slot ($6 held, $7 of them spent, $8 of those uncertain: the meter's
 * `settle`) and a reservation taken ahead for the request the slot is for ($9 credits, 0: none; the meter's `reserve`,
 * taken only if the budget can hold it). The worker's row is locked first, as every statement on these rows does
 * (`expireWorkers`): `before`'s one-time filter runs `alive` before its own lock of the run's row (EXPLAIN shows the
 * filter under the LockRows), and the update's scan of that row locks nothing until it writes, after both. What
 * `took` decides on is the row as `before` locked it, which nobody changes until this statement's commit. A worker marked dead has
 * neither applied (its reservations were counted as spent by its expiry): its slot is taken all the same. Answers the
 * slot's columns, the run's figures, whether the worker is alive and whether the reservation was taken (`took`).
 */
function acquireCarrying(s: string): string {
  return `
    WITH alive AS (
      SELECT 1 FROM ${s}.workers WHERE run_id = $1 AND worker_id = $5 AND status <> 'dead' FOR UPDATE
    ), before AS (
      SELECT (SELECT count(*) FROM alive) > 0 AS alive, spent, reserved, budget FROM ${s}.run_limits
       WHERE run_id = $1 AND (SELECT count(*) FROM alive) >= 0
         FOR UPDATE
    ), decided AS (
      SELECT alive, alive AND $9::float8 > 0 AND budget IS NOT NULL
                    AND spent + $7::float8 + reserved - $6::float8 + $9::float8 <= budget AS took
        FROM before
    ), slot AS (
      UPDATE ${s}.run_limits l
         SET ${SLOT_SET},
             reserved = l.reserved - CASE WHEN d.alive THEN $6::float8 ELSE 0 END + CASE WHEN d.took THEN $9::float8 ELSE 0 END,
             spent = l.spent + CASE WHEN d.alive THEN $7::float8 ELSE 0 END,
             uncertain = l.uncertain + CASE WHEN d.alive THEN $8::float8 ELSE 0 END
        FROM decided d
       WHERE l.run_id = $1
   RETURNING ${slotReturning('l.stop_reason, l.stop_message', 'NULL::text AS retired_reason, NULL::text AS retired_message, NULL::jsonb AS retired_paths')},
             l.budget, l.spent, l.uncertain, l.reserved, d.alive, d.took
    ), mine AS (
      UPDATE ${s}.workers w
         SET reserved = w.reserved - $6::float8 + CASE WHEN slot.took THEN $9::float8 ELSE 0 END, credits = w.credits + $7::float8
        FROM slot
       WHERE w.run_id = $1 AND w.worker_id = $5 AND slot.alive
    )
    SELECT * FROM slot`;
}

/**
 * The shared pacer: $1 the run, $2 an interval or a length of time in ms, $3 the channel the change is told on. The
 * run's row in `run_limits` (one key); or, `keyed`, a pool's key's row in `run_key_limits`, its label the parameter after
 * the others ($5 of `acquire`, $4 of `setInterval` and `pause`), told with the change so that only its pacers renew.
 */
export function pacerStatements(s: string, keyed = false) {
  const table = keyed ? `${s}.run_key_limits` : `${s}.run_limits`;
  const row = (label: string) => (keyed ? `run_id = $1 AND label = ${label}::text` : 'run_id = $1');
  const told = (what: string) => (keyed ? `'${what} ' || $4::text` : `'${what}'`);
  // A key's row answers with the run's stop (one row for the run) and the key's retirements; the run's row with none.
  const stop = keyed
    ? `(SELECT stop_reason FROM ${s}.run_limits WHERE run_id = $1) AS stop_reason, (SELECT stop_message FROM ${s}.run_limits WHERE run_id = $1) AS stop_message`
    : 'stop_reason, stop_message';
  const retired = keyed ? 'retired_reason, retired_message, retired_paths' : 'NULL::text AS retired_reason, NULL::text AS retired_message, NULL::jsonb AS retired_paths';
  return {
    // One round trip per slot. GREATEST with the database's clock skips the slots of an idle spell (a burst must not
    // follow it); with `paused_until`, every worker obeys a pause any of them wrote. The wait is measured at the
    // statement's end, so that time spent queueing for the row's lock is not waited again.
    // It also carries the answers this worker got since its last slot (2xx, 429), and returns the run's totals: the
    // leader learns the rate from every worker's answers at no round trip of its own.
    // A 429 ($3 when each was sent, epoch ms by the database's clock or null; $4 the interval each was paced under)
    // counts only if it was paced no faster than the row's interval now: one sent before a cut reached its worker
    // was paced under the faster rate the cut already answers, and must neither cut again nor mark that rate as the
    // lowest that failed. One paced under an unknown interval (its worker's first slot) counts.
    acquire: `UPDATE ${table}
                 SET ${SLOT_SET}
               WHERE ${row('$5')}
           RETURNING ${slotReturning(stop, retired)}`,
    // The answers a worker got since its last slot, reported without taking a slot (the acquire's accounting alone, its
    // parameters): sent at a 429's pause, so that the leader, renewed by the pause's notification, hears the 429 at
    // once rather than with this worker's next slot after the pause (a cut half a second late at the run's start).
    report: `UPDATE ${table}
                SET accepted = accepted + $2, rejected = rejected + ${countedRejected('count(*)')},
                    rejected_sent_at = GREATEST(rejected_sent_at, to_timestamp(${countedRejected('max(r.at)')} / 1000))
              WHERE ${row('$5')}
          RETURNING ${countedRejected('count(*)')}::int AS counted_rejected`,
    /** The run's row only (undefined for a key's): `acquireCarrying`. */
    acquireCarrying: keyed ? undefined : acquireCarrying(s),
    // A row created without a rate (0) takes the first worker's; once set, the row is the truth (the leader's to change).
    seed: `UPDATE ${table} SET interval_ms = $2 WHERE ${row('$3')} AND interval_ms = 0`,
    // A new rate or a pause is told to every worker (`limitsChannel`): slots they were granted under the old terms and
    // still wait for are taken again, as the local pacer's reservations are, so that a cut is not followed by a burst.
    // The slots reserved under the old terms are given back too (`next_at` no later than one new interval from now):
    // every worker takes its waiting slots again, and those far ahead would otherwise be skipped, a gap after every
    // change.
    // Not before a whole new interval after the latest slot that may have begun (the latest handed out, or now): the
    // next_at left by the old interval may be only an old interval after it, a slot too early after a cut.
    setInterval: `WITH changed AS (UPDATE ${table} SET interval_ms = $2,
                                     next_at = GREATEST(LEAST(next_at, clock_timestamp() + $2 * interval '1 millisecond'),
                                                        LEAST(next_at - interval_ms * interval '1 millisecond', clock_timestamp()) + $2 * interval '1 millisecond')
                                   WHERE ${row('$4')} RETURNING run_id)
                  SELECT pg_notify($3, ${told('rate')}) FROM changed`,
    pause: `WITH changed AS (UPDATE ${table} SET paused_until = GREATEST(paused_until, clock_timestamp() + $2 * interval '1 millisecond'),
                                                    next_at = LEAST(next_at, GREATEST(paused_until, clock_timestamp() + $2 * interval '1 millisecond'))
                         WHERE ${row('$4')} RETURNING run_id)
            SELECT pg_notify($3, ${told('pause')}) FROM changed`,
  } as const;
}

/**
 * A pool's key as the workers of a run share it (`run_key_limits`, shared-key.ts): $1 the run, $2 the key's label. A
 * worker that holds the key writes its row (`ensure`); its share of the credits is reserved and settled there; its
 * retirement is written there and told on the run's channel ($6), and read by every worker with its next slot.
 */
export function keyStatements(s: string) {
  return {
    /** The key's row ($3 its interval, 0: none yet; $4 its share of the credits, null: none): what is set stays. */
    ensure: `INSERT INTO ${s}.run_key_limits (run_id, label, interval_ms, max_credits) VALUES ($1, $2, $3, $4)
             ON CONFLICT (run_id, label) DO UPDATE
               SET interval_ms = CASE WHEN run_key_limits.interval_ms = 0 THEN excluded.interval_ms ELSE run_key_limits.interval_ms END,
                   max_credits = COALESCE(run_key_limits.max_credits, excluded.max_credits)`,
    /** The key $3 (its fingerprint) a label stands for in the run: the first worker's stands; answers the one that does. */
    claim: `INSERT INTO ${s}.run_key_limits (run_id, label, fingerprint) VALUES ($1, $2, $3)
             ON CONFLICT (run_id, label) DO UPDATE SET fingerprint = COALESCE(run_key_limits.fingerprint, excluded.fingerprint)
             RETURNING fingerprint`,
    /** $3 credits, if the key's share can take them beside what it spent and what is reserved: answers a row if so. */
    reserve: `UPDATE ${s}.run_key_limits SET reserved = reserved + $3
               WHERE run_id = $1 AND label = $2 AND (max_credits IS NULL OR spent + reserved + $3 <= max_credits) RETURNING 1`,
    /** Settled reservations: $3 held, $4 of them spent. */
    settle: `UPDATE ${s}.run_key_limits SET reserved = reserved - $3, spent = spent + $4 WHERE run_id = $1 AND label = $2`,
    /** Retired ($3 why, $4 the message) for the run, or ($5) for one endpoint; the first retirement of each stands. */
    retire: `WITH changed AS (
               UPDATE ${s}.run_key_limits
                  SET retired_reason = CASE WHEN $5::text IS NULL THEN COALESCE(retired_reason, $3::text) ELSE retired_reason END,
                      retired_message = CASE WHEN $5::text IS NULL AND retired_reason IS NULL THEN $4::text ELSE retired_message END,
                      retired_at = CASE WHEN $5::text IS NULL THEN COALESCE(retired_at, clock_timestamp()) ELSE retired_at END,
                      retired_paths = CASE WHEN $5::text IS NULL OR retired_paths ? $5::text THEN retired_paths
                                           ELSE retired_paths || jsonb_build_object($5::text, jsonb_build_object('reason', $3::text, 'message', $4::text)) END
                WHERE run_id = $1 AND label = $2 RETURNING run_id)
             SELECT pg_notify($6, 'retired ' || $2::text) FROM changed`,
  } as const;
}

/** A worker's row and the run's stop: $1 the run, $2 the worker. */
export function workerStatements(s: string) {
  return {
    /** The worker's row ($3 host, $4 pid, $5 whether it leads). */
    register: `INSERT INTO ${s}.workers (run_id, worker_id, host, pid, leader) VALUES ($1, $2, $3, $4, $5)`,
    /**
     * A beat, by the database's clock ($3 whether it leads): answers whether another worker took this one for dead, and
     * the run's stop once a worker wrote one (read in the same round trip: a beat is four statements a worker every
     * few seconds, a cost per page that grows with the workers: docs/distributed.md#sizing-a-fleet-and-its-database).
     */
    beat: `UPDATE ${s}.workers SET heartbeat_at = clock_timestamp(), leader = $3 WHERE run_id = $1 AND worker_id = $2
           RETURNING status, (SELECT stop_reason FROM ${s}.run_limits WHERE run_id = $1) AS stop_reason,
                     (SELECT stop_message FROM ${s}.run_limits WHERE run_id = $1) AS stop_message`,
    /** A run-wide stop ($2 reason, $3 message) for every worker; the first one written stands. */
    stopRun: `UPDATE ${s}.run_limits SET stop_reason = $2, stop_message = $3 WHERE run_id = $1 AND stop_reason IS NULL`,
    /** The worker left ($3 why: `finished`, or why it stopped). */
    leave: `UPDATE ${s}.workers SET stopped_at = clock_timestamp(), status = $3 WHERE run_id = $1 AND worker_id = $2`,
  } as const;
}

/** `webdata-etl status`: a pipeline's latest run ($1 the pipeline), then the run's figures ($1 the run). */
export function statusStatements(s: string) {
  return {
    latestRun: `SELECT run_id, status, started_at, invocations FROM ${s}.runs WHERE pipeline = $1 AND status <> 'abandoned' ORDER BY created DESC LIMIT 1`,
    series: `SELECT COUNT(*) FILTER (WHERE status = 'ended')::int AS ended, COUNT(*) FILTER (WHERE status = 'stopped')::int AS stopped,
              COALESCE(SUM(pages), 0)::int AS pages, COALESCE(SUM(items_written), 0)::int AS rows FROM ${s}.series WHERE run_id = $1`,
    limits: `SELECT spent, uncertain, reserved, budget, interval_ms, stop_reason, stop_message FROM ${s}.run_limits WHERE run_id = $1`,
    /** A pool's keys: each one's shared row (none before the schema had them: `relationExists`). */
    keys: `SELECT label, interval_ms, (CASE WHEN paused_until > clock_timestamp() THEN extract(epoch FROM paused_until - clock_timestamp()) ELSE 0 END)::float8 AS paused_seconds,
                  max_credits, spent, reserved, retired_reason, retired_message, retired_paths
             FROM ${s}.run_key_limits WHERE run_id = $1 ORDER BY label`,
    /** Its workers, with whether each is at work ($2 the stale limit in seconds, $3 the liveness locks' prefix). */
    workers: `SELECT worker_id, host, pid, status, leader, pages, credits, started_at,
            extract(epoch FROM clock_timestamp() - heartbeat_at)::float8 AS last_beat,
            ${workerAlive('$2', '$3')} AS alive, ${workerMayBeAlive('$2', '$3')} AS reconnecting
       FROM ${s}.workers WHERE run_id = $1 ORDER BY started_at`,
    /** Whether the schema has a table (occurrences: migration 7; run_key_limits: 8): $1 the table's quoted name. */
    tableExists: `SELECT to_regclass($1) IS NOT NULL AS found`,
    /** The pipeline's latest occurrences, latest first ($2 how many). */
    occurrences: `SELECT due_at, outcome, run_id, worker, claimed_at, note FROM ${s}.occurrences WHERE pipeline = $1 ORDER BY due_at DESC LIMIT $2`,
  } as const;
}

/** Statements of the server's own, on no table of ours: advisory locks ($1 the lock's name), the catalog, notifications. */
export const serverStatements = {
  /** Waits for a session lock (the planning lock). */
  advisoryLock: `SELECT pg_advisory_lock(hashtextextended($1, 0))`,
  /** Waits for a session lock in shared mode (the joining lock, `planningLock`). */
  advisoryLockShared: `SELECT pg_advisory_lock_shared(hashtextextended($1, 0))`,
  /** Lets go of a session lock this session holds exclusively (the deciding lock, once a joiner decided). */
  advisoryUnlock: `SELECT pg_advisory_unlock(hashtextextended($1, 0))`,
  /** Takes a session lock if it is free (the leader's lock). */
  tryAdvisoryLock: `SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS got`,
  /** Whether a schema ($1 its name) exists. */
  schemaExists: `SELECT 1 FROM pg_namespace WHERE nspname = $1`,
  /** Whether a table ($1 its quoted name) exists: pg-boss installed (its version table). */
  tableExists: `SELECT to_regclass($1) IS NOT NULL AS found`,
  /** Waits for a lock held to the end of the transaction (pg-boss's install, one process at a time: `openBoss`). */
  advisoryXactLock: `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
  /** A round trip, to see that a session is still there. */
  ping: 'SELECT 1',
  /** Hears the notifications of a channel (its name quoted: LISTEN takes no parameter). */
  listen: (channel: string) => `LISTEN ${quoteIdentifier(channel)}`,
} as const;
