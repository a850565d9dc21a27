import type { PageCommit } from '../interfaces.ts';
import type { SpendRow } from '../spend-store.ts';
import { addRows, type PageStatement } from '../../commits/postgres-rows.ts';
import { storable } from '../../postgres/storable.ts';

/**
 * A page's commit as one statement of data-modifying CTEs (one round trip, atomic on its own), as pure SQL of the
 * schema `s`: each part applies only if the page took its place (the guard): alone, the journal's number moved to the
 * page's; as a worker of a distributed run (`workerId`), the series was still where this worker left it. The rows of
 * the sinks on the same database go last, each with its checkpoint (`addRows`); the caller runs it. (Its SQL is here,
 * not in statements.ts: its parts are put together for each page, as the page's writes say.)
 */
export function pageStatement(s: string, pipeline: string, commit: PageCommit, workerId: string | undefined) {
  const number = commit.progress.nextPage - 1;
  const statement = ctes(workerId !== undefined ? '(SELECT seq FROM w_seq)' : undefined);
  if (workerId !== undefined) {
    // Where this worker left it: at this page, or not begun (a row a stop wrote before the series' first page).
    const at = statement.p(number);
    statement.add(seriesUpsert(s, statement, commit, `WHERE series.status <> 'ended' AND (series.next_page = ${at}::int OR (series.next_page IS NULL AND series.pages = 0)) RETURNING 1`), 'w_claim');
    statement.add(`UPDATE ${s}.pipelines SET seq = seq + 1 WHERE pipeline = ${statement.p(pipeline)} AND EXISTS (SELECT 1 FROM w_claim) RETURNING seq`, 'w_seq');
    // Counted with the page, so that the workers' pages add up to the run's (a worker killed before its next
    // beat included), and a page refused to this worker is not counted.
    statement.add(`UPDATE ${s}.workers SET pages = pages + 1 WHERE run_id = ${statement.p(commit.runId)}::text AND worker_id = ${statement.p(workerId)}::text AND EXISTS (SELECT 1 FROM w_seq)`);
  } else {
    statement.add(`UPDATE ${s}.pipelines SET seq = seq + 1 WHERE pipeline = ${statement.p(pipeline)} AND seq + 1 = ${statement.p(commit.seq)}::bigint RETURNING seq`, 'w_seq');
  }
  const guard = statement.guard;
  if (commit.spend.length > 0) statement.add(`${insertSpend(s, statement.p, commit.spend)} WHERE ${guard}`);
  // The page's credits move out of the allowance's holds they were held under, with the page (docs/credits.md#holds).
  const moved = moveHeld(s, statement.p, commit.spend);
  if (moved) statement.add(`${moved} AND ${guard}`);
  const dedupe = commit.dedupe;
  // Keys another worker may take at the same moment are claimed: the insert returns the keys it took (one
  // waits for the other's commit, then finds the key taken), and the page's rows and first sightings follow it.
  const claiming = workerId !== undefined && commit.claimKeys === true && dedupe !== null && dedupe.keys.length > 0;
  if (dedupe && dedupe.keys.length > 0) {
    const [scopes, keys, runIds] = columns(dedupe.keys, (k) => [k.scope, k.key, k.runId], 3);
    statement.add(
      `INSERT INTO ${s}.dedupe_keys (pipeline, scope, key, run_id) SELECT ${statement.p(pipeline)}::text, u.* FROM unnest(${statement.p(scopes)}::text[], ${statement.p(keys)}::text[], ${statement.p(runIds)}::text[]) AS u
       WHERE ${guard} ON CONFLICT DO NOTHING${claiming ? ' RETURNING key' : ''}`,
      claiming ? 'w_claimed' : undefined,
    );
  }
  if (claiming) statement.claim('(SELECT key FROM w_claimed)');
  if (dedupe && dedupe.sightings.length > 0) {
    const c = columns(dedupe.sightings, (x) => [x.key, x.query, x.country, x.lang, x.page, x.position, x.rank, x.fetchedAt, x.first], 9);
    const types = ['text', 'text', 'text', 'text', 'int', 'int', 'int', 'timestamptz', 'bool'];
    const first = claiming ? 'u.first AND u.key IN (SELECT key FROM w_claimed)' : 'u.first';
    statement.add(
      `INSERT INTO ${s}.sightings (run_id, dedupe_key, query, country, lang, page, position, rank, fetched_at, first)
       SELECT ${statement.p(commit.runId)}::text, u.key, u.query, u.country, u.lang, u.page, u.position, u.rank, u.fetched_at, ${first}
       FROM unnest(${c.map((column, i) => `${statement.p(column)}::${types[i]}[]`).join(', ')}) AS u(key, query, country, lang, page, position, rank, fetched_at, first) WHERE ${guard}`,
    );
  }
  if (workerId === undefined) statement.add(seriesUpsert(s, statement, commit, '', 'FROM w_seq'));
  // A snapshot of the stage states replaces the changes before it; a page's changes go after them.
  const state = commit.progress.state;
  if (state.kind === 'snapshot') statement.add(`DELETE FROM ${s}.series_state WHERE run_id = ${statement.p(commit.runId)}::text AND series_id = ${statement.p(commit.series.seriesId)}::text AND ${guard}`);
  else if (state.json !== null) {
    statement.add(`INSERT INTO ${s}.series_state (run_id, series_id, seq, changes) SELECT ${statement.p(commit.runId)}::text, ${statement.p(commit.series.seriesId)}::text, seq, ${statement.p(state.json)}::text FROM w_seq`);
  }
  const text = (value: unknown) => `${statement.p(value)}::text`;
  const entry = commit.journal;
  if (entry) {
    statement.add(
      `INSERT INTO ${s}.pages (pipeline, seq, run_id, page_key, series_id, number, meta, output, raw)
       SELECT ${text(pipeline)}, seq, ${[entry.runId, entry.pageKey, entry.seriesId].map(text).join(', ')}, ${statement.p(entry.number)}::int, ${[entry.meta, entry.output, entry.raw].map(text).join(', ')} FROM w_seq`,
    );
  }
  if (commit.checkpoints.length > 0) {
    const [ids, seqs, bytes] = columns(commit.checkpoints, (c) => [c.sinkId, c.checkpoint.seq, c.checkpoint.bytes], 3);
    statement.add(
      `INSERT INTO ${s}.sink_checkpoints (pipeline, sink_id, seq, bytes, updated_at)
       SELECT ${text(pipeline)}, u.*, now() FROM unnest(${statement.p(ids)}::text[], ${statement.p(seqs)}::bigint[], ${statement.p(bytes)}::bigint[]) AS u WHERE ${guard}
       ON CONFLICT (pipeline, sink_id) DO UPDATE SET seq = excluded.seq, bytes = excluded.bytes, updated_at = excluded.updated_at`,
    );
  }
  for (const rows of commit.rows) {
    if (rows.kind !== 'postgres') throw new Error(`rows for ${rows.sinkId} are not for a PostgreSQL table`);
    addRows(statement, rows, commit.seq);
  }
  return { statement, claiming };
}

/**
 * The INSERT of spend rows (one array parameter per column), its parameters taken by `p`: alone, or in a page, where the
 * page's guard follows as its WHERE.
 */
export function insertSpend(s: string, p: (value: unknown) => string, rows: readonly SpendRow[]): string {
  const c = columns(
    rows,
    (r) => [r.runId, r.at, r.seriesId, r.path, r.attempt, r.status, r.credits, r.uncertain, r.latencyMs, r.uncommitted === true, r.key?.fingerprint ?? null, r.key?.label ?? null, r.pipeline ?? null, r.key?.period ?? null],
    14,
  );
  const types = ['text', 'timestamptz', 'text', 'text', 'int', 'text', 'float8', 'bool', 'float8', 'bool', 'text', 'text', 'text', 'text'];
  const names = 'run_id, at, series_id, path, attempt, status, credits, uncertain, latency_ms, uncommitted, key_fingerprint, key_label, pipeline, period';
  // Each row's day on the clocks of its key's allowance, as recorded now (UTC: none), as SQLite's store writes it; by a
  // subquery, not a join, so that the rows keep their order.
  return `INSERT INTO ${s}.spend (${names}, day)
          SELECT u.*, to_char(u.at AT TIME ZONE COALESCE((SELECT a.timezone FROM ${s}.key_allowances a WHERE a.fingerprint = u.key_fingerprint), 'UTC'), 'YYYY-MM-DD')
          FROM unnest(${c.map((column, i) => `${p(column)}::${types[i]}[]`).join(', ')}) AS u(${names})`;
}

/**
 * The UPDATE that moves spend rows' credits out of the allowance's holds they were held under (`SpendRow.key.holder`),
 * one per hold, its parameters taken by `p`; none when no row was held. Ends in a WHERE a caller may add to.
 */
export function moveHeld(s: string, p: (value: unknown) => string, rows: readonly SpendRow[]): string | undefined {
  const held = rows.filter((row) => row.key?.holder && row.key.period !== null && row.key.fingerprint !== null && row.credits > 0);
  if (held.length === 0) return undefined;
  const [fingerprints, periods, holders, credits] = columns(held, (r) => [r.key?.fingerprint, r.key?.period, r.key?.holder, r.credits], 4);
  return `UPDATE ${s}.key_holds h SET credits = GREATEST(h.credits - u.credits, 0)
    FROM (SELECT f, p, hd, sum(c) AS credits FROM unnest(${p(fingerprints)}::text[], ${p(periods)}::text[], ${p(holders)}::text[], ${p(credits)}::float8[]) AS x(f, p, hd, c) GROUP BY f, p, hd) u
    WHERE h.fingerprint = u.f AND h.period = u.p AND h.holder = u.hd`;
}

/** The series' progress as the page leaves it: an upsert, applied `where` the row allows (a worker's claim). */
function seriesUpsert(s: string, statement: PageStatement, commit: PageCommit, where: string, from = ''): string {
  const { series, progress } = commit;
  const text = (value: unknown) => `${statement.p(value)}::text`;
  const int = (value: unknown) => `${statement.p(value)}::int`;
  return `INSERT INTO ${s}.series (run_id, series_id, endpoint, query, country, lang, status, reason, next_page, pages, items_served, items_written, duplicates, digest, no_new, cursor, state)
    SELECT ${[commit.runId, series.seriesId, series.endpoint, series.query, series.country, series.lang, progress.status, progress.reason].map(text).join(', ')},
      ${int(progress.nextPage)}, 1, ${int(progress.served)}, ${int(progress.written)}, ${int(progress.duplicates)}, ${text(progress.digest)}, ${int(progress.noNew)},
      ${text(progress.cursor)}, ${text(progress.state.kind === 'snapshot' ? progress.state.json : null)} ${from}
    ON CONFLICT (run_id, series_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, next_page = excluded.next_page,
      pages = series.pages + 1, items_served = series.items_served + excluded.items_served, items_written = series.items_written + excluded.items_written,
      duplicates = series.duplicates + excluded.duplicates, digest = excluded.digest, no_new = excluded.no_new, cursor = excluded.cursor,
      state = ${progress.state.kind === 'snapshot' ? 'excluded.state' : 'series.state'}, error = NULL ${where}`;
}

/** One statement of data-modifying CTEs, its parameters numbered as they are added (`p`), the page's guard given. */
function ctes(seq?: string): PageStatement & { values: unknown[]; add(sql: string, name?: string): void; sql(final: string): string; claim(keys: string): void } {
  const values: unknown[] = [];
  const parts: string[] = [];
  let claimed: string | undefined;
  return {
    values,
    ...(seq === undefined ? {} : { seq }),
    get claimed() {
      return claimed;
    },
    claim: (keys: string) => {
      claimed = keys;
    },
    guard: 'EXISTS (SELECT 1 FROM w_seq)',
    p: (value: unknown) => `$${values.push(storable(value))}`,
    add: (sql: string, name = `w_${parts.length}`) => void parts.push(`${name} AS (${sql})`),
    sql: (final: string) => `WITH ${parts.join(',\n')}\n${final}`,
  };
}

/** Rows of column arrays for `unnest`: one array per column, `width` of them. */
function columns<T>(rows: readonly T[], pick: (row: T) => unknown[], width: number): unknown[][] {
  const out: unknown[][] = Array.from({ length: width }, () => []);
  for (const row of rows) pick(row).forEach((value, i) => (out[i] as unknown[]).push(value));
  return out;
}
