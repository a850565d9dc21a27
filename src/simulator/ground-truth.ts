import { changedOn, dayRanking, dayRankOf, type RankedResult, volatility } from './days.ts';
import type { ResolvedSimulatorOptions } from './options.ts';
import type { SeriesOf, Simulator } from './types.ts';

/**
 * What the simulator's days really were, for tests and benchmarks to measure a run against: a series' ranking on a
 * day, a domain's best rank, whether the series moved, its rate of moving. Pure functions of the seed and the
 * settings, the same answers the search endpoint serves; `day` defaults to the simulator's day now.
 */
export function groundTruth(
  settings: ResolvedSimulatorOptions,
  today: () => number | undefined,
): Pick<Simulator, 'ranking' | 'rankOf' | 'movedOn' | 'volatility'> {
  const dayOf = (day: number | undefined): number => {
    const chosen = day ?? today();
    if (chosen === undefined) throw new RangeError('the simulator has no day: give one, or start it with `day` (or call setDay)');
    return chosen;
  };
  const full = (series: SeriesOf) => ({ q: series.q, country: series.country ?? '', lang: series.lang ?? '' });
  return {
    ranking: (series, day): RankedResult[] => dayRanking(full(series), settings, dayOf(day)),
    rankOf: (series, domain, day) => dayRankOf(full(series), domain, settings, dayOf(day)),
    movedOn: (series, day) => changedOn(full(series), settings, day),
    volatility: (series) => volatility(settings.seed, full(series)),
  };
}
