// Where workers of one run lose against one (issue 43, item 7): the pages each worker committed, second by second,
// and the run's tail — from the first worker that found the queue empty to the last page — with the series still open
// then, by worker. Read from the page events each worker prints (test/fixtures/run-pipeline.ts) and its phase marks.

/** A page a worker committed: when (ms since the first spawn, the parent's clock), of which series, which page. */
export interface PageMark {
  atMs: number;
  series: string;
  number: number;
}

const round = (ms: number) => Math.round(ms);

/**
 * The pages of each worker by second from the first spawn (`bySecond[s][w]`), and the tail: when the first worker
 * found the queue empty (`queueEmptyMs`, from the first spawn), the pages each worker committed after it, each
 * worker's last page, and the series still being paged then (started, not ended) with the pages they had left.
 */
export function joinTimeline(pages: PageMark[][], phases: Record<string, number>[]) {
  const all = pages.flat();
  const lastMs = Math.max(0, ...all.map((p) => p.atMs));
  const bySecond = Array.from({ length: Math.ceil(lastMs / 1000) }, () => pages.map(() => 0));
  pages.forEach((marks, w) => {
    for (const mark of marks) {
      const row = bySecond[Math.floor(mark.atMs / 1000)];
      if (row) row[w] = (row[w] ?? 0) + 1;
    }
  });
  // Phase marks are from each worker's spawn; its `spawn` mark is when that was, from the first spawn.
  const empties = phases.map((p) => (p['queue-empty'] === undefined ? Number.POSITIVE_INFINITY : (p.spawn ?? 0) + p['queue-empty']));
  const queueEmptyMs = Math.min(...empties);
  // A series' first and last page (its pages are in order, and one worker's unless it was handed on).
  const series = new Map<string, { worker: number; firstMs: number; lastMs: number; pages: number }>();
  pages.forEach((marks, worker) => {
    for (const mark of marks) {
      const one = series.get(mark.series) ?? { worker, firstMs: mark.atMs, lastMs: mark.atMs, pages: 0 };
      one.lastMs = Math.max(one.lastMs, mark.atMs);
      one.firstMs = Math.min(one.firstMs, mark.atMs);
      one.pages += 1;
      series.set(mark.series, one);
    }
  });
  const openAtEmpty = [...series.values()]
    .filter((s) => s.lastMs > queueEmptyMs)
    .map((s) => ({ worker: s.worker, pagesLeft: pages[s.worker]?.filter((p) => series.get(p.series) === s && p.atMs > queueEmptyMs).length ?? 0, lastMs: round(s.lastMs) }));
  return {
    bySecond,
    queueEmptyMs: Number.isFinite(queueEmptyMs) ? round(queueEmptyMs) : null,
    lastPageMs: round(lastMs),
    /** Each worker's last page, from the first spawn: the workers done before the last wait for it (idle slots). */
    lastPageByWorkerMs: pages.map((marks) => round(Math.max(0, ...marks.map((p) => p.atMs)))),
    pagesAfterEmptyByWorker: pages.map((marks) => marks.filter((p) => p.atMs > queueEmptyMs).length),
    openAtEmpty,
  };
}

/** A worker's request, answer or committed page, of a series (ms since the first spawn). */
export interface CycleEvent {
  type: 'request' | 'response' | 'page';
  series: string;
  atMs: number;
}

/**
 * A worker's page cycle taken apart (a series has one request at a time, so a page is the series' last request and
 * answer before it): its pages; the cycle, a slot's time per page (its concurrency of 2 slots, from its first request
 * to its last page); and of a page, on average, request → answer (the server's latency and the way there and back)
 * and answer → committed (the stages, the commit); what is left of the cycle is a slot's time between a page's commit
 * and the next request (its permit, the shared pacer's slot, the budget's reservation).
 */
export function pageCycle(events: CycleEvent[], slots = 2) {
  const last = new Map<string, { request?: number; response?: number }>();
  let answer = 0;
  let commit = 0;
  let pages = 0;
  for (const event of events) {
    const one = last.get(event.series) ?? {};
    if (event.type === 'request') last.set(event.series, { request: event.atMs });
    else if (event.type === 'response') last.set(event.series, { ...one, response: event.atMs });
    else if (one.request !== undefined && one.response !== undefined) {
      answer += one.response - one.request;
      commit += event.atMs - one.response;
      pages += 1;
    }
  }
  const first = events.find((e) => e.type === 'request')?.atMs ?? 0;
  const end = events.findLast((e) => e.type === 'page')?.atMs ?? 0;
  const cycleMs = pages ? (slots * (end - first)) / pages : 0;
  const mean = (total: number) => (pages ? Math.round((total / pages) * 10) / 10 : 0);
  return { pages, cycleMs: Math.round(cycleMs * 10) / 10, answerMs: mean(answer), commitMs: mean(commit), betweenMs: Math.round((cycleMs - mean(answer) - mean(commit)) * 10) / 10 };
}
