import { z } from 'zod';
import type { Series } from './page.ts';

/*
 * Tracked domains and depth until found (docs/pipelines.md#tracked-domains-and-depth-until-found): for each series, the
 * best rank of each tracked domain among its items, and how deep the run searched (docs/design.md#where-tracked-ranks-live).
 */

/**
 * A host name as a domain is tracked: lower case, no trailing dot, no `www.` (an item's host matches with or without
 * it) unless that is all there is before its last label (`www.com` stays).
 */
export function trackedHost(host: string): string {
  const lower = host.trim().toLowerCase().replace(/\.$/, '');
  return lower.startsWith('www.') && lower.indexOf('.', 4) > 0 ? lower.slice(4) : lower;
}

/** A host name: dot-separated labels of letters, digits and hyphens (IDNs as their `xn--` form), at least two. */
const HOST = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

const domainSchema = z
  .string()
  .transform(trackedHost)
  .refine((host) => HOST.test(host), { error: 'must be a host name such as example.com (no scheme, path or port)' });

export const trackSchema = z
  .strictObject({
    /** Tracked in every series. */
    domains: z.array(domainSchema).min(1, { error: 'needs at least one domain, e.g. ["example.com"]' }).max(100, { error: 'at most 100 domains' }).optional(),
    /** A tag column of the queries file: each query's own domains, separated by spaces, commas or semicolons. */
    column: z.string().min(1, { error: 'must name a column of the queries file' }).optional(),
  })
  .refine((track) => (track.domains === undefined) !== (track.column === undefined), {
    error: 'give domains (the same for every query) or column (a column of the queries file naming each query\'s), one of them',
  });

export const refreshSchema = z.strictObject({
  /** `full`: every series to its full depth; `until-found`: a series ends once its tracked domains are found, plus `margin` pages. */
  depth: z.enum(['full', 'until-found'], { error: 'must be "full" or "until-found"' }).default('full'),
  /** Pages fetched after the page on which the last tracked domain was found. */
  margin: z.int({ error: 'must be a whole number of pages, 0 or more' }).nonnegative({ error: 'must be a whole number of pages, 0 or more' }).default(0),
  /**
   * `changes`: a run whose budget cannot pay for every series spends it on those most likely to have changed (the
   * refresh planner: docs/pipelines.md#the-refresh-planner); absent: every series is fetched. No default is written in,
   * so that the terms of runs recorded before it stay the same.
   */
  priority: z.enum(['changes'], { error: 'must be "changes" (or left out: every series is fetched)' }).optional(),
  /** The most runs in a row the planner may skip a series (default 7). */
  maxAgeRuns: z.int({ error: 'must be a whole number of runs, 1 or more' }).min(1, { error: 'must be a whole number of runs, 1 or more' }).optional(),
});

export type TrackConfig = z.output<typeof trackSchema>;
export type RefreshConfig = z.output<typeof refreshSchema>;

/** The name a series' tracked ranks go by in its state, beside its stages' (whose names are words: normalize, dedupe). */
export const TRACK_STATE = '@track';

/** What a series keeps of its tracked domains, committed with each page (docs/design.md#where-tracked-ranks-live). */
export interface TrackState {
  /** Domain → best rank found so far (absent: not found yet). */
  found: Record<string, number>;
  /** The highest rank among the series' items so far: how deep it was searched. */
  searched: number;
  /** The page on which every tracked domain had been found (depth until found counts its margin from it). */
  allFoundOn?: number;
}

/** One tracked domain of a series in a run: its best rank, or null when not found within `searched`. */
export interface TrackedRank {
  readonly domain: string;
  readonly rank: number | null;
  readonly searched: number;
}

/** The domains a tag cell names, split on spaces, commas or semicolons, and the words in it that are not host names. */
export function hostsIn(cell: string | undefined): { hosts: string[]; bad: string[] } {
  const words = (cell ?? '').split(/[\s,;]+/).filter((word) => word !== '');
  const hosts = words.map(trackedHost);
  return { hosts: [...new Set(hosts.filter((host) => HOST.test(host)))], bad: words.filter((_, i) => !HOST.test(hosts[i] as string)) };
}

/** A pipeline's tracking: which domains each series tracks, what a page found, and whether it ends the series. */
export interface Tracking {
  /** The series' tracked domains (none: the series is not tracked; only the search endpoint's series are). */
  domainsOf(series: Series): readonly string[];
  /** Whether a series may end on a page after its stages (depth until found): its source waits for each page's commit. */
  readonly untilFound: boolean;
  /**
   * Notes what a page's items found in `state` (ranks and domains as normalized); resolves whether the page ends the
   * series by depth until found (`found`).
   */
  observe(state: TrackState, domains: readonly string[], page: { number: number; items: readonly unknown[] }): boolean;
}

export function tracking(track: TrackConfig, refresh: RefreshConfig | undefined, searchPath: string): Tracking {
  const everywhere = track.domains ? [...new Set(track.domains)] : undefined;
  const column = track.column;
  const untilFound = refresh?.depth === 'until-found';
  const margin = refresh?.margin ?? 0;
  return {
    untilFound,
    domainsOf: (series) => (series.endpoint !== searchPath ? [] : (everywhere ?? hostsIn(series.tags?.[column as string]).hosts)),
    observe(state, domains, page) {
      const wanted = new Set(domains);
      for (const item of page.items) {
        const { rank, domain } = item as { rank?: unknown; domain?: unknown };
        if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 1) continue;
        if (rank > state.searched) state.searched = rank;
        if (typeof domain !== 'string') continue;
        const host = trackedHost(domain);
        if (!wanted.has(host)) continue;
        const best = state.found[host];
        if (best === undefined || rank < best) state.found[host] = rank;
      }
      if (state.allFoundOn === undefined && domains.every((domain) => state.found[domain] !== undefined)) state.allFoundOn = page.number;
      return untilFound && state.allFoundOn !== undefined && page.number >= state.allFoundOn + margin;
    },
  };
}

/** A series' tracked ranks as its state has them (no state: nothing was fetched). */
export function trackedRanks(domains: readonly string[], state: Partial<TrackState> | undefined): TrackedRank[] {
  const searched = typeof state?.searched === 'number' ? state.searched : 0;
  return domains.map((domain) => {
    const rank = state?.found?.[domain];
    return { domain, rank: typeof rank === 'number' ? rank : null, searched };
  });
}
