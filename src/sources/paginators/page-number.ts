import type { Paginator } from './paginator.ts';

/** Pages by number: `param` (default `page`) counts up from `first` (default 1). Only the stop rules end a series. */
export function pageNumber(options: { param?: string; first?: number } = {}): Paginator {
  const param = options.param ?? 'page';
  const request = (number: number) => ({ number, params: { [param]: number } });
  return {
    first: (resume) => request(resume?.nextPage ?? options.first ?? 1),
    next: (answer) => request(answer.request.number + 1),
  };
}
