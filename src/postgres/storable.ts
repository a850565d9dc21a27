/**
 * A statement's parameter as PostgreSQL's `text` can hold it: U+0000, which `text` refuses ("invalid byte sequence
 * for encoding UTF8: 0x00"), becomes U+FFFD, also inside arrays (the unnested columns of a page). Lone surrogates need
 * nothing here: the driver encodes them as U+FFFD. What else a database refuses: docs/security.md.
 */
export function storable(value: unknown): unknown {
  if (typeof value === 'string') return value.includes('\0') ? value.replaceAll('\0', '\ufffd') : value;
  if (Array.isArray(value) && value.some((element) => typeof element === 'string' && element.includes('\0'))) return value.map(storable);
  return value;
}
