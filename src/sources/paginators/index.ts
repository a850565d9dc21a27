// How the pages of a series follow each other: one interface, a small file per style.
export type { PageAnswer, PageRequest, Paginator, Resumed } from './paginator.ts';
export { pageNumber } from './page-number.ts';
export { cursorFrom, valueAt } from './cursor-from.ts';
export { custom } from './custom.ts';

import { cursorFrom } from './cursor-from.ts';
import { custom } from './custom.ts';
import { pageNumber } from './page-number.ts';

/** The paginators, as the package root offers them: `paginators.pageNumber()`, `paginators.cursorFrom(from, param)`, `paginators.custom(next)`. */
export const paginators = { pageNumber, cursorFrom, custom } as const;
