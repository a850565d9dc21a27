// How the pages of a series follow each other: one interface, a small file per style.
export type { PageAnswer, PageRequest, Paginator, Resumed } from './paginator.ts';
export { pageNumber } from './page-number.ts';
export { cursorFrom, valueAt } from './cursor-from.ts';
export { custom } from './custom.ts';
