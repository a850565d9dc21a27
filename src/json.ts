/**
 * JSON text of any value that came from JSON.parse, however deep. `JSON.stringify` recurses and throws a
 * RangeError on nesting deeper than the stack allows (a hostile or broken API can send that); this falls back to an
 * iterative writer with an explicit stack. Lone surrogates are escaped as `JSON.stringify` does (well-formed JSON).
 */
export function toJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return iterativeJson(value);
  }
}

type Frame =
  | { kind: 'array'; items: readonly unknown[]; index: number }
  | { kind: 'object'; entries: [string, unknown][]; index: number };

function iterativeJson(root: unknown): string {
  const out: string[] = [];
  const stack: Frame[] = [];
  const write = (value: unknown) => {
    if (value !== null && typeof value === 'object') {
      if (Array.isArray(value)) {
        out.push('[');
        stack.push({ kind: 'array', items: value, index: 0 });
      } else {
        out.push('{');
        const entries = Object.entries(value).filter(([, v]) => v !== undefined && typeof v !== 'function' && typeof v !== 'symbol');
        stack.push({ kind: 'object', entries, index: 0 });
      }
      return;
    }
    out.push(JSON.stringify(value) ?? 'null');
  };
  write(root);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    if (frame.kind === 'array') {
      if (frame.index >= frame.items.length) {
        out.push(']');
        stack.pop();
        continue;
      }
      if (frame.index > 0) out.push(',');
      const item = frame.items[frame.index++];
      write(item === undefined || typeof item === 'function' ? null : item);
    } else {
      if (frame.index >= frame.entries.length) {
        out.push('}');
        stack.pop();
        continue;
      }
      if (frame.index > 0) out.push(',');
      const [key, item] = frame.entries[frame.index++] as [string, unknown];
      out.push(JSON.stringify(key), ':');
      write(item);
    }
  }
  return out.join('');
}
