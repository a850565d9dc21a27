import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { renderReport, writeReport } from '../../src/report/index.ts';
import { columns, rankLines } from '../../src/report/svg.ts';
import { createSpendView } from '../../src/analytics/index.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { handMadeDatabase, R2 } from './analytics-fixture.ts';
import { workdir } from '../pipeline-helpers.ts';

/** The marks of one chart (by `data-chart`, the n-th of that name), counted from the SVG text. */
function marks(html: string, chart: string, nth = 0): Record<string, number> {
  const charts = html.split(`<svg data-chart="${chart}"`).slice(1);
  const svg = (charts[nth] ?? '').split('</svg>')[0] ?? '';
  const counts: Record<string, number> = {};
  for (const match of svg.matchAll(/data-mark="(\w+)"/g)) counts[match[1] as string] = (counts[match[1] as string] ?? 0) + 1;
  return counts;
}

/** The tick labels of a chart's value axis, bottom to top. */
function axisTicks(html: string, chart: string): string[] {
  const svg = html.split(`<svg data-chart="${chart}"`)[1]?.split('</svg>')[0] ?? '';
  return [...svg.matchAll(/class="axis" text-anchor="end">([^<]*)</g)].map((m) => m[1] as string);
}

/** The rank history's legend: each line's label. */
function legends(html: string): string[] {
  const svg = html.split('<svg data-chart="history"')[1]?.split('</svg>')[0] ?? '';
  return [...svg.matchAll(/class="label" fill="[^"]*">([^<]*)</g)].map((m) => m[1] as string);
}

const NOW = new Date('2026-11-22T00:00:00Z');

/** Run ids a minute apart, as a pipeline names its runs. */
const runIds = (n: number) => Array.from({ length: n }, (_, i) => `2026-11-${String(1 + Math.floor(i / 24)).padStart(2, '0')}T${String(i % 24).padStart(2, '0')}-30-00-000Z-${String(i).padStart(6, '0')}`);

/** The labels of a chart's bottom axis (centred text on its lowest row of text), with their centres. */
function bottomLabels(svg: string): { text: string; x: number }[] {
  const texts = [...svg.matchAll(/<text x="([\d.]+)" y="([\d.]+)" class="axis" text-anchor="middle">([^<]*)</g)].map((m) => ({ x: Number(m[1]), y: Number(m[2]), text: m[3] as string }));
  const lowest = Math.max(...texts.map((t) => t.y));
  return texts.filter((t) => t.y === lowest).sort((a, b) => a.x - b.x);
}

/**
 * Neighbouring labels that overlap, by a width of the test's own: 0.6em a character at the axis's 11 px (digits are
 * 0.55–0.64em wide in the common sans-serif fonts).
 */
function overlapping(labels: readonly { text: string; x: number }[]): string[] {
  const width = (text: string) => text.length * 11 * 0.6;
  return labels.slice(1).flatMap((label, i) => {
    const before = labels[i] as { text: string; x: number };
    return label.x - before.x < (width(label.text) + width(before.text)) / 2 ? [`"${before.text}" at ${before.x} and "${label.text}" at ${label.x}`] : [];
  });
}

describe('the HTML report', () => {
  it('draws the expected marks for a database computed by hand', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const html = await renderReport({ database: dir.path('hand.sqlite'), now: NOW });
    // Two runs: two bars of credits.
    expect(marks(html, 'credits')).toEqual({ bar: 2 });
    // Six rank bands, always.
    expect(marks(html, 'ranks')).toEqual({ bar: 6 });
    // x.com, y.com, z.com in the latest rankings.
    expect(marks(html, 'domains')).toEqual({ bar: 3 });
    // Query q in us (its country with the most rows): b, a, e in the latest run; b and a in both runs (a line each),
    // e only in the latest (a point, no line).
    expect(marks(html, 'history')).toEqual({ line: 2, point: 5 });
    // gb and us: a 2 × 2 matrix.
    expect(marks(html, 'overlap')).toEqual({ cell: 4 });
    expect(html).toContain('0.50');
    // Self-contained: no script, no external resource.
    expect(html).not.toMatch(/<script|<link|src=|url\(/i);
  });

  it('filters by query and country', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const gb = await renderReport({ database: dir.path('hand.sqlite'), country: 'gb', now: NOW });
    expect(gb).toContain('in gb (en)');
    // gb's latest rankings: d (y.com), a and b (x.com).
    expect(marks(gb, 'domains')).toEqual({ bar: 2 });
    const none = await renderReport({ database: dir.path('hand.sqlite'), query: 'nothing like it', now: NOW });
    expect(none).toContain('No results yet');
  });

  it('has a clear empty state, and copes with fifty runs', async () => {
    using dir = workdir();
    const empty = new Database(dir.path('empty.sqlite'));
    sqliteStateStore(empty);
    createSpendView(empty);
    empty.close();
    const html = await renderReport({ database: dir.path('empty.sqlite'), now: NOW });
    expect(html).toContain('No results yet');
    expect(html).toContain('npm start');
    expect(html).not.toContain('data-chart');

    const runs = Array.from({ length: 60 }, (_, i) => `2026-01-${String(1 + (i % 28)).padStart(2, '0')}T${String(i % 24).padStart(2, '0')}-00-00-000Z-${String(i).padStart(6, '0')}`).sort();
    handMadeDatabase(dir.path('many.sqlite'), runs);
    const many = await renderReport({ database: dir.path('many.sqlite'), now: NOW });
    expect(marks(many, 'credits')).toEqual({ bar: 50 });
    expect(many).toContain('the latest 50');
  });

  it('count axes tick at whole numbers (was 1.5 for a run of 3 credits, 13.5 for 27), covering the tallest bar', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const html = await renderReport({ database: dir.path('hand.sqlite'), now: NOW });
    for (const chart of ['credits', 'ranks']) {
      const ticks = axisTicks(html, chart);
      expect([chart, ticks.every((tick) => /^\d[\d,]*$/.test(tick))], ticks.join(' ')).toEqual([chart, true]);
      expect(ticks[0]).toBe('0');
    }
    // The latest run spent 3 credits: 0 to 3, one apart.
    expect(axisTicks(html, 'credits')).toEqual(['0', '1', '2', '3']);
    // Counts of 27 (and of 0.5-credit requests) on the charts themselves.
    expect(axisTicks(columns({ chart: 'c', title: 't' }, [{ label: 'a', value: 27 }]), 'c')).toEqual(['0', '10', '20', '30']);
    expect(axisTicks(columns({ chart: 'c', title: 't' }, [{ label: 'a', value: 1.5 }]), 'c')).toEqual(['0', '0.5', '1', '1.5']);
  });

  it("the credits chart's run labels do not overlap at 7, 30 or 50 runs (seven were drawn 83 px apart, each about 90 px wide), and the newest is labelled", async () => {
    using dir = workdir();
    for (const count of [2, 7, 30, 50]) {
      const runs = runIds(count);
      handMadeDatabase(dir.path(`runs-${count}.sqlite`), runs);
      const html = await renderReport({ database: dir.path(`runs-${count}.sqlite`), now: NOW });
      const svg = html.split('<svg data-chart="credits"')[1]?.split('</svg>')[0] ?? '';
      const labels = bottomLabels(svg);
      expect([count, overlapping(labels)]).toEqual([count, []]);
      // As many as fit, not fewer: more than one when there are several runs, and the newest among them.
      expect(labels.length).toBeGreaterThanOrEqual(Math.min(count, 3));
      expect(labels.at(-1)?.text).toBe('11-' + runs.at(-1)?.slice(8, 10) + ' ' + runs.at(-1)?.slice(11, 19).replaceAll('-', ':'));
    }
  });

  it("the rank history's run labels do not overlap (eight runs drew the last two 66 px apart)", () => {
    for (const count of [2, 7, 8, 13, 30]) {
      const runs = runIds(count).map((run) => `11-${run.slice(8, 10)} ${run.slice(11, 19).replaceAll('-', ':')}`);
      const svg = rankLines({ chart: 'history', title: 't' }, runs, [{ label: 'a', ranks: runs.map((_, i) => 1 + (i % 3)) }]);
      const labels = bottomLabels(svg);
      expect([count, overlapping(labels)]).toEqual([count, []]);
      expect(labels.at(-1)?.text).toBe(runs.at(-1));
      expect(labels.length).toBeGreaterThanOrEqual(Math.min(count, 3));
    }
  });

  it('a result without a title is labelled by its domain and path, shortened (was its bare URL); a title wins over a row without one', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const db = new Database(dir.path('hand.sqlite'));
    db.prepare(`UPDATE results SET title = NULL WHERE dedupe_key LIKE '%/b'`).run();
    const long = 'https://www.example.com/espresso-machines/reviews/2026/the-best-espresso-machine-for-a-small-kitchen?utm_source=news#top';
    db.prepare(`UPDATE results SET title = NULL, url = ?, domain = 'example.com' WHERE dedupe_key LIKE '%/e'`).run(long);
    // The same result again in the latest run, on a row without a title (no dedupe): its title still names it.
    db.prepare(`INSERT INTO results SELECT run_id, query, country, lang, 2, position, rank, NULL, url, domain, snippet, dedupe_key, fetched_at, raw FROM results WHERE run_id = ? AND country = 'us' AND dedupe_key LIKE '%/a'`).run(R2);
    db.close();
    const html = await renderReport({ database: dir.path('hand.sqlite'), now: NOW });
    expect(legends(html)).toEqual(['x.com/b', 'Title a', 'example.com/…/the-best-espresso-machine…']);
    for (const legend of legends(html)) expect(legend.length).toBeLessThanOrEqual(40);
  });

  it('escapes what the data holds', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const db = new Database(dir.path('hand.sqlite'));
    db.prepare(`UPDATE results SET title = '<script>alert(1)</script>' WHERE dedupe_key LIKE '%/b'`).run();
    db.close();
    const html = await renderReport({ database: dir.path('hand.sqlite'), now: NOW });
    expect(html).not.toContain('<script>');
    expect(html).toContain('&lt;script&gt;');
  });

  it('a tampered database (text where numbers belong, markup everywhere, a summary that is not JSON) renders with nothing injected', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const db = new Database(dir.path('hand.sqlite'));
    const summary = JSON.stringify({
      reason: '<i>why</i>',
      durationMs: '<b>x</b>',
      requests: { total: '<script>alert("requests")</script>' },
      items: { written: '<img src=x onerror=alert(1)>' },
    });
    db.prepare(`UPDATE runs SET pipeline = '<script>alert("pipeline")</script>', status = 'completed"><script>alert("status")</script>', summary = ?`).run(summary);
    db.prepare(`INSERT INTO runs (run_id, pipeline, status, started_at, fingerprint, plan, summary) VALUES (?, x'3c62', 'completed', '2026-01-03', 'f', '{}', '{not json')`).run('2026-01-03T00-00-00-000Z-<b>');
    db.prepare(`INSERT INTO runs (run_id, pipeline, status, started_at, fingerprint, plan, summary) VALUES (x'3c696d673e', 'p', 'stopped', '2026-01-04', 'f', '{}', ?)`).run(JSON.stringify({ durationMs: { toFixed: 1 }, requests: { total: 1e400 }, items: [] }));
    db.prepare(`INSERT INTO spend (run_id, at, series_id, path, attempt, status, credits, uncertain, latency_ms) VALUES (?, 'x', 's', '/p', 1, '200', '<script>c</script>', 1, 0)`).run('2026-01-03T00-00-00-000Z-<b>');
    // Text in rank columns, markup in titles, queries, countries and domains; views that return text for numbers.
    db.prepare(`UPDATE results SET rank = '"><script>alert("rank")</script>' WHERE dedupe_key LIKE '%/a'`).run();
    db.prepare(`UPDATE results SET title = '<svg onload=alert(1)>', domain = '<script>alert("domain")</script>' WHERE dedupe_key LIKE '%/b'`).run();
    db.prepare(`UPDATE results SET url = NULL, title = x'3c', dedupe_key = 'k' WHERE dedupe_key LIKE '%/e'`).run();
    db.exec(`DROP VIEW report_overlap;
      CREATE VIEW report_overlap AS SELECT 'q' AS query, 'en' AS lang, 'gb' AS country_a, 'us"><script>' AS country_b, 1 AS shared, 3 AS top_a, 3 AS top_b, '<script>alert("jaccard")</script>' AS jaccard
      UNION ALL SELECT 'q', 'en', 'gb', 'zz', 1, 3, 3, 7;
      DROP VIEW report_domains;
      CREATE VIEW report_domains AS SELECT 'q' AS query, 'us' AS country, '<b>d</b>' AS domain, '<b>9</b>' AS results, '<i>1</i>' AS best_rank, 'x' AS average_rank, 'y' AS share
      UNION ALL SELECT 'q', 'us', 42, 2, 1, 1, 1 UNION ALL SELECT 'q', 'us', NULL, 1, 1, 1, 1;`);
    db.close();

    const html = await renderReport({ database: dir.path('hand.sqlite'), now: NOW });
    // Only the elements the page itself uses: none came from the data.
    const elements = new Set([...html.matchAll(/<\/?([a-zA-Z][\w-]*)/g)].map((m) => (m[1] as string).toLowerCase()));
    const own = ['html', 'head', 'meta', 'title', 'style', 'body', 'header', 'h1', 'h2', 'p', 'main', 'section', 'div', 'span', 'strong', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'svg', 'line', 'text', 'rect', 'path', 'circle', 'figure', 'figcaption', 'code'];
    expect([...elements].filter((e) => !own.includes(e))).toEqual([]);
    // A status goes into a class attribute only if it is one the page knows.
    expect([...html.matchAll(/class="status ([^"]*)"/g)].map((m) => m[1])).toEqual(['stopped', 'completed', 'unknown', 'unknown']);
    // Text is shown escaped; numbers that are not numbers are shown as –, never NaN.
    expect(html).toContain('us&quot;&gt;&lt;script&gt;');
    expect(html).toContain('&lt;i&gt;why&lt;/i&gt;');
    expect(html).not.toMatch(/NaN|Infinity|undefined|\[object/);
    for (const payload of ['alert("requests")', 'alert(&quot;requests&quot;)', 'onerror', 'alert("rank")', 'alert(&quot;rank&quot;)', 'alert(&quot;jaccard&quot;)', '&lt;b&gt;9']) expect([payload, html.includes(payload)]).toEqual([payload, false]);
  });

  it('renders in headless Chromium: charts drawn, no network request, a screenshot saved', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    const file = dir.path('report.html');
    await writeReport({ database: dir.path('hand.sqlite'), out: file, now: NOW });
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const requests: string[] = [];
      page.on('request', (request) => requests.push(request.url()));
      await page.goto(`file://${file}`);
      const drawn = await page.$$eval('svg[data-chart]', (svgs) =>
        svgs.map((svg) => {
          const box = svg.getBoundingClientRect();
          return { chart: svg.getAttribute('data-chart'), width: box.width, height: box.height, marks: svg.querySelectorAll('[data-mark]').length };
        }),
      );
      expect(drawn.map((d) => d.chart)).toEqual(['credits', 'ranks', 'domains', 'history', 'overlap']);
      for (const chart of drawn) {
        expect(chart.width).toBeGreaterThan(100);
        expect(chart.height).toBeGreaterThan(50);
        expect(chart.marks).toBeGreaterThan(0);
      }
      // The page itself, and nothing else: no fonts, scripts, images or beacons from anywhere.
      expect(requests).toEqual([`file://${file}`]);
      mkdirSync(join('data', 'screenshots'), { recursive: true });
      const shot = join('data', 'screenshots', 'report-smoke.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect(readFileSync(shot).subarray(1, 4).toString()).toBe('PNG');
    } finally {
      await browser.close();
    }
  }, 60_000);

  it("seven runs' credit labels, as Chromium draws them in the report's font, stand apart", async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('seven.sqlite'), runIds(7));
    const file = dir.path('seven.html');
    await writeReport({ database: dir.path('seven.sqlite'), out: file, now: NOW });
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'] });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`file://${file}`);
      // The drawn boxes of the labels under the bars (centred, on the chart's lowest row of text), left to right.
      const boxes = await page.$$eval('svg[data-chart="credits"] text[text-anchor="middle"]', (texts) => {
        const all = texts.map((text) => {
          const box = (text as unknown as { getBBox(): { x: number; width: number } }).getBBox();
          return { text: text.textContent, y: Number(text.getAttribute('y')), x: box.x, width: box.width };
        });
        const lowest = Math.max(...all.map((t) => t.y));
        return all.filter((t) => t.y === lowest).sort((a, b) => a.x - b.x);
      });
      expect(boxes.length).toBeGreaterThan(1);
      for (const box of boxes) expect(box.width).toBeGreaterThan(40);
      // Apart by more than a space, to be read as two (before, each was drawn 0–1 px from the next: one long line).
      const crowded = boxes.slice(1).filter((box, i) => box.x - 6 < (boxes[i] as (typeof boxes)[number]).x + (boxes[i] as (typeof boxes)[number]).width);
      expect(crowded.map((box) => box.text)).toEqual([]);
      // For a look (data/ is not committed).
      mkdirSync(join('data', 'screenshots'), { recursive: true });
      await page.locator('svg[data-chart="credits"]').screenshot({ path: join('data', 'screenshots', 'report-credits-seven-runs.png') });
    } finally {
      await browser.close();
    }
  }, 60_000);
});
