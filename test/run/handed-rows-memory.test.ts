import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { describe, expect, it } from 'vitest';
import type { PageCommit } from '../../src/state/interfaces.ts';
import { seriesStates } from '../../src/pipeline/context.ts';
import type { Page, Series } from '../../src/pipeline/page.ts';
import { createCommitter } from '../../src/run/commit.ts';
import type { Sink, SqliteRows } from '../../src/sinks/sink.ts';
import type { StateStore } from '../../src/state/interfaces.ts';

// Item 7 of issue 43 (memory at a million items): a page's rows (every item's `raw` as JSON text, about 192 KB a page
// of real-sized items) were held by the committer from the page's hand-over to a store that queues commits (SQLite's
// commit thread, which has its own copy from the moment it is posted) until the page committed, with up to the commit
// window of pages waiting: long enough to outlive V8's young generation, so that each page's rows went to the old one.

const series: Series = { id: 'search|q|us|', endpoint: '/searchengine/search', query: 'q', country: 'us', lang: '' };

function page(number: number): Page<unknown> {
  const items = Array.from({ length: 100 }, (_, i) => ({ url: `https://example.com/${number}/${i}`, raw: { title: `result ${i} `.repeat(20) } }));
  return { key: `${series.id}#${number}`, series, number, items, meta: { status: 200, requestId: undefined, fetchedAt: '2026-11-28T00:00:00.000Z', latencyMs: 0, bytes: 0, served: items.length } } as Page<unknown>;
}

describe('a page handed over to a store that queues commits', () => {
  it('leaves its rows to the store: they are collectable while the page waits for its commit (were: held by the committer until then)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // The rows made for each page, watched without being held.
    const madeRows: WeakRef<unknown[]>[] = [];
    const sink = {
      kind: 'sqlite',
      path: 'results.sqlite',
      id: 'sqlite:results.sqlite#results',
      held: () => 0,
      commits: {
        kind: 'rows',
        database: 'state.sqlite',
        rows: (p: Page<unknown>) => {
          const values = (p.items as { raw: unknown }[]).map((item) => JSON.stringify(item.raw));
          madeRows.push(new WeakRef(values));
          return { kind: 'sqlite', sinkId: 'sqlite:results.sqlite#results', insert: { into: 'results', width: 1, then: '' }, values };
        },
        committed: () => undefined,
        writeAlone: async () => undefined,
      },
    } as unknown as Sink<unknown>;
    // As SQLite's commit thread takes a page: a copy at once (postMessage's), committed when the test lets it.
    const received: PageCommit[] = [];
    let commitAll!: () => void;
    const gate = new Promise<void>((resolve) => (commitAll = resolve));
    const store = {
      database: 'state.sqlite',
      path: 'state.sqlite',
      queuesCommits: true,
      currentSeq: async () => 0,
      commitPage: (commit: PageCommit) => {
        const copy = structuredClone(commit);
        return gate.then(() => {
          received.push(copy);
          return [];
        });
      },
      prune: async () => undefined,
      spend: async () => undefined,
    } as unknown as StateStore;
    const committer = createCommitter({ store, runId: 'run-1', sinks: [sink], states: seriesStates(), keepJournal: false });
    await committer.start();
    // A commit window's worth, handed over and waiting.
    const commits = [1, 2, 3].map((number) => committer.commit(page(number)));
    expect(madeRows).toHaveLength(3);
    // Collected in a later turn (a WeakRef keeps its target through the turn it was made in).
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(madeRows.map((rows) => rows.deref() === undefined)).toEqual([true, true, true]);
    commitAll();
    await Promise.all(commits);
    // The store had every page's rows, each item's raw JSON among them.
    const values = received.map((commit) => (commit.rows[0] as SqliteRows).values);
    expect(values.map((rows) => rows.length)).toEqual([100, 100, 100]);
    expect(values[0]?.[0]).toBe(JSON.stringify({ title: 'result 0 '.repeat(20) }));
  });
});
