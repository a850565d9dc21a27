// Bench (i)'s tail in a model (issue 43, item 7): 72 series of 5 pages in order on 3 workers × 2 slots, a page a cycle
// of 170 ms ± 20, each worker holding `hold` series at once (a distributed worker holds concurrency + 1: fetchAll in
// src/sources/paging.ts) and giving its slots to the series waiting first (`fifo`, as its page permits do) or to the one
// with the most pages left (`lrf`). The run's length against perfectly even work (360 pages / 6 slots × 170 ms):
// how much any order of handing out pages could gain at the end. Seeded, 50 runs each, workers starting 0, 200, 300 ms.
// `node scripts/with-node.mjs test/bench/join-tail-model.ts`
type Policy = 'fifo' | 'lrf';

interface Model {
  workers: number;
  slots: number;
  hold: number;
  series: number;
  pages: number;
  cycleMs: number;
  jitterMs: number;
  startsMs: number[];
}

const MODEL: Model = { workers: 3, slots: 2, hold: 3, series: 72, pages: 5, cycleMs: 170, jitterMs: 20, startsMs: [0, 200, 300] };

/** A small seeded generator (mulberry32), so that each policy meets the same draws. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One run of the model: the time of its last page (ms). */
export function modelRun(model: Model, policy: Policy, seed: number): number {
  const draw = random(seed);
  const queue = Array.from({ length: model.series }, (_, i) => i);
  const left = new Array<number>(model.series).fill(model.pages);
  const waiting: number[][] = Array.from({ length: model.workers }, () => []);
  const free = new Array<number>(model.workers).fill(model.slots);
  const active = new Array<number>(model.workers).fill(0);
  const events: { at: number; worker: number; series: number }[] = [];
  let end = 0;
  const take = (w: number) => {
    while ((active[w] ?? 0) < model.hold && queue.length > 0) {
      active[w] = (active[w] ?? 0) + 1;
      waiting[w]?.push(queue.shift() as number);
    }
  };
  const dispatch = (w: number, now: number) => {
    const mine = waiting[w] ?? [];
    while ((free[w] ?? 0) > 0 && mine.length > 0) {
      const index = policy === 'fifo' ? 0 : mine.reduce((best, s, i) => ((left[s] ?? 0) > (left[mine[best] ?? 0] ?? 0) ? i : best), 0);
      const [series] = mine.splice(index, 1);
      free[w] = (free[w] ?? 0) - 1;
      events.push({ at: now + model.cycleMs + (draw() * 2 - 1) * model.jitterMs, worker: w, series: series ?? 0 });
    }
  };
  model.startsMs.forEach((start, w) => {
    take(w);
    dispatch(w, start);
  });
  while (events.length > 0) {
    events.sort((a, b) => a.at - b.at);
    const { at, worker, series } = events.shift() as { at: number; worker: number; series: number };
    free[worker] = (free[worker] ?? 0) + 1;
    left[series] = (left[series] ?? 0) - 1;
    end = Math.max(end, at);
    if ((left[series] ?? 0) > 0) waiting[worker]?.push(series);
    else {
      active[worker] = (active[worker] ?? 0) - 1;
      take(worker);
    }
    dispatch(worker, at);
  }
  return end;
}

if (import.meta.main) {
  const even = ((MODEL.series * MODEL.pages) / (MODEL.workers * MODEL.slots)) * MODEL.cycleMs;
  const rows = [];
  for (const policy of ['fifo', 'lrf'] as const) {
    for (const hold of [2, 3]) {
      const runs = Array.from({ length: 50 }, (_, seed) => modelRun({ ...MODEL, hold }, policy, seed) / 1000);
      const mean = runs.reduce((a, b) => a + b, 0) / runs.length;
      rows.push({ policy, hold, meanS: Math.round(mean * 1000) / 1000, minS: Math.round(Math.min(...runs) * 1000) / 1000, maxS: Math.round(Math.max(...runs) * 1000) / 1000 });
    }
  }
  console.log(JSON.stringify({ model: MODEL, evenS: Math.round(even) / 1000, rows }));
}
