import { describe, expect, it } from 'vitest';
import { items, mapItems, type Page, type RunContext, type Stage } from '../../src/index.ts';
import { pipe } from '../../src/pipeline/compose.ts';
import { StageContractError } from '../../src/errors/index.ts';
import { throughStages } from '../../src/pipeline/compose.ts';
import { seriesStates } from '../../src/pipeline/context.ts';

const series = { id: 's', endpoint: '/x', query: 'q', country: '', lang: '' };
const page = (number: number, values: number[]): Page<number> => ({
  key: `s#${number}`,
  series,
  number,
  items: values,
  meta: { status: 200, requestId: undefined, fetchedAt: '', latencyMs: 0, bytes: 0, served: values.length },
});

function context(): RunContext {
  const states = seriesStates();
  return { runId: 'r', pipeline: 'p', signal: new AbortController().signal, seriesState: (stage, s, init) => states.get(stage, s, init) };
}

describe('stage composition', () => {
  it('pipe chains stages in order', async () => {
    async function* source() {
      yield page(1, [1, 2]);
      yield page(2, [3]);
    }
    const double = mapItems((n: number) => n * 2);
    const plusOne = mapItems((n: number) => n + 1);
    const out: number[] = [];
    for await (const n of items(pipe<number>(source(), [double, plusOne], context()))) out.push(n);
    expect(out).toEqual([3, 5, 7]);
  });

  it('an early exit returns every stage and the source (their finally blocks run)', async () => {
    const closed: string[] = [];
    async function* source() {
      try {
        for (let i = 1; ; i++) yield page(i, [i]);
      } finally {
        closed.push('source');
      }
    }
    const tracked = (name: string): Stage<number, number> =>
      async function* (pages) {
        try {
          for await (const p of pages) yield p;
        } finally {
          closed.push(name);
        }
      };
    for await (const p of throughStages(source(), [tracked('a'), tracked('b')], context())) {
      if (p.number === 3) break;
    }
    // return() travels upstream, so the innermost generator finishes first.
    expect(closed).toEqual(['source', 'a', 'b']);
  });

  it('an error in a stage propagates to the consumer and closes the source', async () => {
    let sourceClosed = false;
    async function* source() {
      try {
        yield page(1, [1]);
        yield page(2, [2]);
      } finally {
        sourceClosed = true;
      }
    }
    const failing: Stage<number, number> = async function* (pages) {
      for await (const p of pages) {
        if (p.number === 2) throw new Error('stage broke on page 2');
        yield p;
      }
    };
    await expect(async () => {
      for await (const _ of throughStages(source(), [failing], context()));
    }).rejects.toThrow('stage broke on page 2');
    expect(sourceClosed).toBe(true);
  });

  it('refuses stages that merge, invent or reorder pages', async () => {
    async function* source() {
      yield page(1, [1]);
      yield page(2, [2]);
    }
    const merge: Stage<number, number> = async function* (pages) {
      const all: number[] = [];
      let last: Page<number> | undefined;
      for await (const p of pages) {
        all.push(...p.items);
        last = p;
      }
      if (last) yield { ...last, items: all };
    };
    const invent: Stage<number, number> = async function* (pages) {
      for await (const p of pages) {
        yield p;
        yield { ...p, key: 's#99', number: 99 };
      }
    };
    for (const stage of [merge, invent]) {
      await expect(async () => {
        for await (const _ of throughStages(source(), [stage], context()));
      }).rejects.toBeInstanceOf(StageContractError);
    }
  });
});
