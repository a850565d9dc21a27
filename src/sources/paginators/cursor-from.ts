import { custom } from './custom.ts';
import type { Paginator } from './paginator.ts';

/**
 * Pages by a cursor in the body: the value at `from` (a dot path, `meta.next`) is sent as `param` in the next
 * request; absent, null or empty, the series ends (`end`).
 */
export function cursorFrom(from: string, param: string, options: { first?: number } = {}): Paginator {
  return custom((answer) => {
    const value = valueAt(answer.body, from);
    return value === undefined || value === null || value === '' ? null : { [param]: value };
  }, options);
}

/** The value at a dot path (`a.b.0.c`), or undefined. */
export function valueAt(value: unknown, path: string): unknown {
  let current = value;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}
