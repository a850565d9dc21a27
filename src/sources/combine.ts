import { ValidationError } from '../errors/validation-error.ts';
import type { Source, SourcePlan } from './source.ts';

/**
 * Several sources as one: their series run side by side through the same scheduler, budget and outputs (search and
 * other endpoints in one pipeline, say). A 403 on one endpoint stops that endpoint's series; the others go on.
 */
export function combineSources(...sources: Source[]): Source {
  if (sources.length === 0) {
    throw new ValidationError('Invalid combined source', [{ path: 'source', message: 'combineSources() needs at least one source: combineSources(searchPages({ … }), endpointPages({ … }))' }]);
  }
  const notSources = sources.flatMap((source, i) => (isSource(source) ? [] : [i]));
  if (notSources.length > 0) {
    throw new ValidationError(
      'Invalid combined source',
      notSources.map((i) => ({ path: `source.${i}`, message: 'must be a source such as searchPages({ queries: [...] }) or endpointPages({ path })' })),
    );
  }
  const plan = (): SourcePlan => {
    const plans = sources.map((source) => source.plan());
    return {
      endpoint: [...new Set(plans.map((p) => p.endpoint))].join(', '),
      seriesCount: plans.reduce((n, p) => n + p.seriesCount, 0),
      maxPages: Math.max(...plans.map((p) => p.maxPages)),
      fingerprint: { combined: plans.map((p) => p.fingerprint) },
      tagColumns: [...new Set(plans.flatMap((p) => p.tagColumns ?? []))],
      notes: plans.flatMap((p) => p.notes ?? []),
      *series() {
        for (const p of plans) yield* p.series();
      },
    };
  };
  return {
    plan,
    pages: (ctx) => merge(sources.map((source) => source.pages(ctx))),
  };
}

/** Yields from several async iterables as their items arrive; one failing fails the whole, closing the others. */
async function* merge<T>(iterables: AsyncIterable<T>[]): AsyncGenerator<T> {
  const iterators = iterables.map((iterable) => iterable[Symbol.asyncIterator]());
  const pending = new Map<number, Promise<{ index: number; result: IteratorResult<T> }>>();
  const pull = (index: number) => pending.set(index, (iterators[index] as AsyncIterator<T>).next().then((result) => ({ index, result })));
  iterators.forEach((_, index) => pull(index));
  try {
    while (pending.size > 0) {
      const { index, result } = await Promise.race(pending.values());
      if (result.done) pending.delete(index);
      else {
        pull(index);
        yield result.value;
      }
    }
  } finally {
    // Not awaited: a source still waiting for its next page finishes its return once that wait ends (the runner
    // stops the scheduler when it leaves early, so it does end).
    for (const iterator of iterators) void iterator.return?.();
  }
}

function isSource(value: unknown): value is Source {
  const source = value as Partial<Source> | null;
  return typeof source === 'object' && source !== null && typeof source.plan === 'function' && typeof source.pages === 'function';
}
