import { type FaultRule, faultRuleSchema, type ResolvedFaultRule, type ResolvedSimulatorOptions } from './options.ts';
import { generator } from './rng.ts';

/** What a request is matched against. */
export interface RequestFacts {
  path: string;
  method: string;
  key: string;
  q: string | undefined;
  page: number | undefined;
  country: string | undefined;
  lang: string | undefined;
}

// Omit each member of the union on its own, so that the result stays a discriminated union.
type OmitEach<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

export type Fault = OmitEach<ResolvedFaultRule, 'match' | 'times' | 'after'>;

interface LiveRule {
  rule: ResolvedFaultRule;
  seen: number;
  applied: number;
}

/**
 * Decides which fault, if any, a request meets: scripted rules first (deterministic, in order, each with its
 * own count), then the random rates, drawn from the seed in arrival order.
 */
export function faultBook(options: ResolvedSimulatorOptions) {
  const rules: LiveRule[] = options.rules.map((rule) => ({ rule, seen: 0, applied: 0 }));
  const random = generator(options.seed ^ 0x5eed);
  const rates = options.faults;

  return {
    add(rule: FaultRule): void {
      rules.push({ rule: faultRuleSchema.parse(rule), seen: 0, applied: 0 });
    },

    clear(): void {
      rules.length = 0;
    },

    scripted(facts: RequestFacts): Fault | undefined {
      for (const live of rules) {
        const { rule } = live;
        if (!matches(rule.match, facts)) continue;
        if (rule.times !== undefined && live.applied >= rule.times) continue;
        live.seen += 1;
        if (live.seen <= rule.after) continue;
        live.applied += 1;
        const { match: _match, times: _times, after: _after, ...fault } = rule;
        return fault;
      }
      return undefined;
    },

    random(): Fault | undefined {
      const draw = random();
      let edge = rates.serverErrorRate;
      if (draw < edge) return { fault: 'status', status: [500, 502, 503, 504][Math.floor(random() * 4)] as number, headers: {} };
      if (draw < (edge += rates.hangRate)) return { fault: 'hang', charged: false };
      if (draw < (edge += rates.resetRate)) return { fault: 'reset', charged: false };
      if (draw < (edge += rates.malformedRate)) return { fault: 'malformed', form: 'truncated' };
      if (draw < (edge += rates.redirectRate)) return { fault: 'redirect', status: 302 };
      return undefined;
    },
  };
}

export type FaultBook = ReturnType<typeof faultBook>;

export function matches(match: Readonly<Partial<ResolvedFaultRule['match']>>, facts: RequestFacts): boolean {
  return (
    (match.path === undefined || match.path === facts.path) &&
    (match.method === undefined || match.method.toUpperCase() === facts.method) &&
    (match.key === undefined || match.key === facts.key) &&
    (match.q === undefined || match.q === facts.q) &&
    (match.page === undefined || match.page === facts.page) &&
    (match.country === undefined || match.country === facts.country) &&
    (match.lang === undefined || match.lang === facts.lang)
  );
}
