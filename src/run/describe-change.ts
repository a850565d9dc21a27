/** "queries: added "x", removed "y"; maxPages: 3 → 5". */
export function describeChange(before: Record<string, unknown>, after: Record<string, unknown>): string {
  const changes: string[] = [];
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = before[key];
    const b = after[key];
    if (JSON.stringify(a) === JSON.stringify(b)) continue;
    if (Array.isArray(a) && Array.isArray(b)) {
      const was = new Set(a.map((v) => JSON.stringify(v)));
      const now = new Set(b.map((v) => JSON.stringify(v)));
      const added = [...now].filter((v) => !was.has(v));
      const removed = [...was].filter((v) => !now.has(v));
      const parts = [added.length ? `added ${clip(added)}` : '', removed.length ? `removed ${clip(removed)}` : ''].filter(Boolean);
      changes.push(`${key}: ${parts.join(', ') || 'reordered'}`);
    } else {
      changes.push(`${key}: ${JSON.stringify(a) ?? 'none'} → ${JSON.stringify(b) ?? 'none'}`);
    }
  }
  return changes.join('; ') || 'the plan changed';
}

function clip(values: string[]): string {
  return values.length > 5 ? `${values.slice(0, 5).join(', ')} and ${values.length - 5} more` : values.join(', ');
}
