import type { PageAnswer, Paginator } from './paginator.ts';

/**
 * Pages by a cursor that `next` finds in each answer: what the next request sends (kept with the page, so that a
 * resume sends it again), or null (or undefined) when there is no next page. The first request sends nothing of its
 * own. Pages are numbered from `first` (default 1), for their keys.
 */
export function custom(next: (answer: PageAnswer) => Record<string, unknown> | null | undefined, options: { first?: number } = {}): Paginator {
  return {
    first: (resume) => ({ number: resume?.nextPage ?? options.first ?? 1, params: resume?.cursor ?? {}, cursor: resume?.cursor }),
    next(answer) {
      const cursor = next(answer) ?? null;
      return cursor === null ? null : { number: answer.request.number + 1, params: cursor, cursor };
    },
  };
}
