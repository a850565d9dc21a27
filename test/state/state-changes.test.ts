import { describe, expect, it } from 'vitest';
import { seriesStates } from '../../src/pipeline/context.ts';
import { applyStateChanges } from '../../src/state/state-changes.ts';
import type { StateWrite } from '../../src/state/interfaces.ts';

const series = { id: 's', endpoint: '/x', query: 'q', country: '', lang: '' };

/** A store of one series' state as the stores keep it: the last snapshot and the changes after it. */
function storedSeries() {
  let snapshot: string | null = null;
  let changes: string[] = [];
  let written = 0;
  return {
    commit(write: StateWrite) {
      written += write.json?.length ?? 0;
      if (write.kind === 'snapshot') {
        snapshot = write.json;
        changes = [];
      } else if (write.json !== null) changes.push(write.json);
    },
    read: () => applyStateChanges(snapshot === null ? null : JSON.parse(snapshot), changes.map((c) => JSON.parse(c) as unknown)),
    get written() {
      return written;
    },
    get pieces() {
      return changes.length;
    },
  };
}

const asJson = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

/** A small deterministic generator, so a failure can be replayed from its seed. */
function random(seed: number) {
  let state = seed >>> 0;
  return (n: number) => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state % n;
  };
}

describe('stage states written as what each page changed', () => {
  it('the stored snapshot and changes, applied, equal the state in memory after every page, whatever a stage does to it', () => {
    for (let seed = 1; seed <= 60; seed++) {
      const next = random(seed);
      const states = seriesStates();
      const stored = storedSeries();
      const keys = ['a', 'b', 'c', '__proto__', 'constructor', '', 'ключ', 'x.y'];
      const init = () => ({ list: [] as unknown[], nested: Object.create(null) as Record<string, unknown> });
      for (let pageNumber = 1; pageNumber <= 25; pageNumber++) {
        const stage = ['dedupe', 'normalize', 'mine'][next(3)] as string;
        const state = states.get<Record<string, unknown>>(stage, series, init);
        for (let op = next(6); op > 0; op--) {
          const key = keys[next(keys.length)] as string;
          const nested = state.nested as Record<string, unknown>;
          switch (next(9)) {
            case 0:
              state[key] = next(100);
              break;
            case 1:
              nested[key] = { deep: { value: next(100) }, list: [next(5)] };
              break;
            case 2: {
              const inner = nested[key];
              if (inner !== null && typeof inner === 'object' && 'deep' in inner) (inner.deep as Record<string, number>).value = next(100);
              break;
            }
            case 3:
              delete nested[key];
              break;
            case 4:
              (state.list as unknown[]).push({ at: pageNumber, of: [next(3)] });
              break;
            case 5: {
              const list = state.list as { at: number }[];
              if (list.length > 0) (list[next(list.length)] as { at: number }).at = -pageNumber;
              break;
            }
            case 6:
              (state.list as unknown[]).splice(0, next(3));
              break;
            case 7:
              delete state[key];
              break;
            default:
              state.nested = { replaced: pageNumber };
          }
        }
        stored.commit(states.write(series.id, false));
        const memory = Object.fromEntries(['dedupe', 'normalize', 'mine'].map((name) => [name, states.get(name, series, init)]));
        // States no page has used yet are created by the probe above: the store must have them too.
        stored.commit(states.write(series.id, false));
        expect(asJson(stored.read()), `seed ${seed}, page ${pageNumber}`).toEqual(asJson(memory));
      }
    }
  });

  it('an object assigned into the state is kept as a copy: a later change to it through the stage’s own reference reaches neither memory nor the file', () => {
    const states = seriesStates();
    const stored = storedSeries();
    const state = states.get<Record<string, unknown>>('mine', series, () => ({}));
    const kept = { count: 1 };
    state.entry = kept;
    stored.commit(states.write(series.id, false));
    kept.count = 2;
    stored.commit(states.write(series.id, false));
    expect(state.entry).toEqual({ count: 1 });
    expect(asJson(stored.read())).toEqual({ mine: { entry: { count: 1 } } });
    // Through the state, it is a change like any other.
    (state.entry as { count: number }).count = 3;
    stored.commit(states.write(series.id, false));
    expect(asJson(stored.read())).toEqual({ mine: { entry: { count: 3 } } });
  });

  it('a growing state writes in all a small multiple of its size, not its size on every page (was: the whole state on every page)', () => {
    const states = seriesStates();
    const stored = storedSeries();
    for (let pageNumber = 1; pageNumber <= 200; pageNumber++) {
      const seen = states.get<Record<string, 1>>('dedupe', series, () => Object.create(null));
      for (let i = 0; i < 100; i++) seen[`https://example.com/${pageNumber}/${i}`] = 1;
      stored.commit(states.write(series.id, false));
    }
    const size = JSON.stringify({ dedupe: states.get('dedupe', series, () => ({})) }).length;
    // Written whole, 200 pages would write about 100 times the final size.
    expect(stored.written).toBeLessThan(4 * size);
    expect(Object.keys(stored.read().dedupe as object)).toHaveLength(20_000);
  });

  it('a resumed series goes on from what it restored, with changes after it', () => {
    const first = seriesStates();
    const stored = storedSeries();
    const ranks = first.get<Record<string, number>>('normalize', series, () => Object.create(null));
    ranks.a = 1;
    stored.commit(first.write(series.id, false));
    ranks.b = 2;
    stored.commit(first.write(series.id, false));
    const resumed = seriesStates();
    resumed.restore(series.id, stored.read());
    const again = resumed.get<Record<string, number>>('normalize', series, () => Object.create(null));
    expect({ ...again }).toEqual({ a: 1, b: 2 });
    again.c = 3;
    const write = resumed.write(series.id, false);
    expect(write).toEqual({ kind: 'changes', json: JSON.stringify({ normalize: [[['c'], 3]] }) });
    stored.commit(write);
    expect(asJson(stored.read())).toEqual({ normalize: { a: 1, b: 2, c: 3 } });
  });

  it('a page that changed nothing writes nothing; a short series writes only changes; a series that ends writes no state', () => {
    const states = seriesStates();
    const seen = states.get<Record<string, 1>>('dedupe', series, () => Object.create(null));
    seen.a = 1;
    expect(states.write(series.id, false)).toEqual({ kind: 'changes', json: '{"dedupe":[[[],{"a":1}]]}' });
    seen.b = 1;
    expect(states.write(series.id, false)).toEqual({ kind: 'changes', json: '{"dedupe":[[["b"],1]]}' });
    expect(states.write(series.id, false)).toEqual({ kind: 'changes', json: null });
    expect(states.write(series.id, true)).toEqual({ kind: 'snapshot', json: null });
  });

  it('once the changes written would outweigh the last snapshot (and 64 KB), the state is written whole instead', () => {
    const states = seriesStates();
    const seen = states.get<Record<string, 1>>('dedupe', series, () => Object.create(null));
    const kinds: string[] = [];
    for (let pageNumber = 1; pageNumber <= 40; pageNumber++) {
      for (let i = 0; i < 100; i++) seen[`https://example.com/${pageNumber}/${i}`] = 1;
      const write = states.write(series.id, false);
      kinds.push(write.kind);
      if (write.kind === 'snapshot') expect(Object.keys(JSON.parse(write.json as string).dedupe)).toHaveLength(100 * pageNumber);
    }
    // A page's changes are about 3.3 KB (33 bytes a key): 64 KB of them take 19 pages, and the snapshot of 20 pages
    // (54 KB) is still under 64 KB, so the next comes 20 pages later.
    expect(kinds.flatMap((kind, i) => (kind === 'snapshot' ? [i + 1] : []))).toEqual([20, 40]);
  });
});
