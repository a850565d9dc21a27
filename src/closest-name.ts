/**
 * "Did you mean": the name among `names` that `word` is most likely a slip of (`maxPage` → `maxPages`, `sink` →
 * `sinks`), or undefined when none is near enough to be worth saying. Near is an edit distance (a letter added,
 * dropped, changed, or two swapped; case counts for nothing) of at most a third of the word, and at least 1: a short
 * word shares too much with any other to suggest one that is two edits away.
 */
export function closestName(word: string, names: Iterable<string>): string | undefined {
  const lower = word.toLowerCase();
  const most = Math.max(1, Math.floor(word.length / 3));
  let best: { name: string; distance: number } | undefined;
  for (const name of names) {
    const distance = editDistance(lower, name.toLowerCase());
    if (distance <= most && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Optimal string alignment distance (Levenshtein with adjacent swaps), in two rows of memory. */
function editDistance(a: string, b: string): number {
  // A typed word can be anything: past this, no name of ours is near it.
  if (Math.abs(a.length - b.length) > 3 || a.length > 200) return Number.POSITIVE_INFINITY;
  let before = Array.from({ length: b.length + 1 }, () => 0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, (previous[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, (before[j - 2] as number) + 1);
      current.push(distance);
    }
    before = previous;
    previous = current;
  }
  return previous[b.length] as number;
}
