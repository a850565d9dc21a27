import type { SeriesStates } from '../pipeline/context.ts';
import type { Page } from '../pipeline/page.ts';
import { TRACK_STATE, type TrackState, type Tracking } from '../pipeline/tracked-domains.ts';

/**
 * What a page found of its series' tracked domains, noted in the series' state (committed with the page, restored on
 * resume, read by another worker that takes the series over); true when it ends the series by depth until found. A
 * series with no tracked domains (another endpoint's, or an empty cell of the column) is left alone: it pages in full.
 */
export function trackPage(tracking: Tracking | undefined, states: SeriesStates, page: Page<unknown>): boolean {
  if (!tracking) return false;
  const domains = tracking.domainsOf(page.series);
  if (domains.length === 0) return false;
  const state = states.get<TrackState>(TRACK_STATE, page.series, () => ({ found: {}, searched: 0 }));
  return tracking.observe(state, domains, page);
}
