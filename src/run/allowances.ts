import { randomBytes } from 'node:crypto';
import { ValidationError, type ValidationIssue } from '../errors/validation-error.ts';
import type { Pipeline } from '../config/define.ts';
import { spreadWithoutSchedule } from '../recurring/allowance-share.ts';
import { type Allowance, type AllowanceInput, allowanceSchema, describeAllowance } from '../schedule/allowance.ts';
import { type AllowanceLedger, AllowanceMeter } from '../schedule/allowance-meter.ts';
import type { Clock } from '../schedule/clock.ts';
import type { SourcePlan } from '../sources/source.ts';
import type { AllowanceStore, KeyAllowance, RecordedAllowance } from '../state/allowance-store.ts';
import type { LimitStore } from '../state/limit-store.ts';
import type { SpendKey } from '../state/spend-store.ts';
import type { KeyIdentities } from './remembered-limits.ts';

/** How long a hold of an allowance stands unless renewed: a run that died stops renewing, and its credits go back. */
export const HOLD_TTL_MS = 60_000;

/** The run's keys as the state store knows them: each label's fingerprint, and the allowance that binds it, if any. */
export interface KeyBook {
  readonly fingerprints: ReadonlyMap<string, string>;
  readonly allowances: ReadonlyMap<string, RecordedAllowance>;
}

/**
 * The allowance the run declares for its keys (docs/credits.md#allowances): `run()`'s, else the pipeline's; checked,
 * with each key's own, before anything opens or is sent: each must hold one request of the pipeline's heaviest
 * endpoint.
 */
export function runAllowance(pipeline: Pipeline, plan: SourcePlan, given: AllowanceInput | undefined): Allowance | undefined {
  const allowance = given === undefined ? pipeline.allowance : ValidationError.parse(allowanceSchema, given, 'Invalid run options', 'allowance');
  const declared = declaredAllowances(pipeline, allowance);
  const [heaviest, weight] = heaviestEndpoint(pipeline, plan);
  const issues: ValidationIssue[] = declared
    .filter(([, each]) => each.credits < weight)
    .map(([path, each]): ValidationIssue => ({
      path: `${path}.credits`,
      message: `${each.credits} is less than one request: a request to ${heaviest} costs ${weight} credits (credits.weights): give at least ${weight}`,
    }))
    // run()'s allowance may spread where the pipeline has no schedule to spread it over.
    .concat(spreadWithoutSchedule(pipeline, allowance).map((issue) => ({ path: issue.path.join('.'), message: issue.message })));
  if (issues.length > 0) throw new ValidationError(`Pipeline "${pipeline.name}" cannot run`, issues);
  return allowance;
}

/** Every allowance the run declares, by the field that declares it. */
function declaredAllowances(pipeline: Pipeline, allowance: Allowance | undefined): [string, Allowance][] {
  return [
    ...(allowance ? ([['allowance', allowance]] as [string, Allowance][]) : []),
    ...Object.entries(pipeline.keys ?? {}).flatMap(([label, own]) => (own.allowance ? [[`keys.${label}.allowance`, own.allowance] as [string, Allowance]] : [])),
  ];
}

/** The endpoint of the plan whose request costs most, and its weight. */
function heaviestEndpoint(pipeline: Pipeline, plan: SourcePlan): [string, number] {
  const weights = pipeline.credits.weights;
  return plan.endpoint
    .split(', ')
    .map((path): [string, number] => [path, weights[path] ?? 1])
    .reduce((heaviest, each) => (each[1] > heaviest[1] ? each : heaviest));
}

/**
 * The run's keys declared in the state store (docs/credits.md#allowances), before the run is recorded: each key's own
 * allowance, else the run's, recorded by its fingerprint; a key declared none is bound by what another pipeline
 * recorded. Another pipeline's allowance that differs refuses the run, naming both pipelines and both allowances (a
 * key by its label, never itself).
 */
export async function declareAllowances(store: AllowanceStore & LimitStore, pipeline: Pipeline, identities: KeyIdentities | undefined, allowance: Allowance | undefined): Promise<KeyBook> {
  if (identities === undefined) {
    const [declared] = declaredAllowances(pipeline, allowance);
    if (declared === undefined) return { fingerprints: new Map(), allowances: new Map() };
    throw new ValidationError(`Pipeline "${pipeline.name}" cannot run`, [
      {
        path: declared[0],
        message: 'an allowance is kept by the API key it binds: send with WEBDATA_API_KEY or WEBDATA_API_KEYS (a token, or a client given to run(), has no key to keep it by)',
      },
    ]);
  }
  const fingerprints = identities.fingerprints(await store.keySecret());
  const allowances = new Map<string, RecordedAllowance>();
  const issues: ValidationIssue[] = [];
  for (const [label, fingerprint] of fingerprints) {
    const own = pipeline.keys?.[label]?.allowance;
    const declared = own ?? allowance;
    const declaration = declared ? ({ credits: declared.credits, per: declared.per, timezone: declared.timezone } satisfies KeyAllowance) : null;
    const result = await store.declareAllowance({ fingerprint, label, pipeline: pipeline.name, allowance: declaration });
    if ('conflict' in result) {
      const other = result.conflict;
      issues.push({
        path: own ? `keys.${label}.allowance` : 'allowance',
        message:
          `pipeline "${pipeline.name}" declares ${describeAllowance(declaration as KeyAllowance)} for the key labelled "${label}", but pipeline "${other.pipeline}" ` +
          `recorded ${describeAllowance(other)} for the same key (labelled "${other.label}" there) in this state database: declare the same, or none to be ` +
          `bound by it; only pipeline "${other.pipeline}" may change it`,
      });
    } else if (result.bound) allowances.set(label, result.bound);
  }
  if (issues.length > 0) throw new ValidationError(`Pipeline "${pipeline.name}" cannot run`, issues);
  return { fingerprints, allowances };
}

/** The run's allowances as its scheduler spends them: a meter per key that has one, and the run's holds. */
export interface RunAllowances {
  /** Each key's meter by its label (keys without an allowance have none). */
  readonly meters: ReadonlyMap<string, AllowanceMeter>;
  /** What a spend row says of the key an answer went with (its label none: the run's one key). */
  spendKey(label: string | undefined, period: string | undefined): SpendKey | undefined;
  /** The run's spend is written: its holds go (what they held and it did not spend is free again). */
  release(): Promise<void>;
  /** Stops renewing the run's holds (however it ended: holds not released expire). */
  stop(): void;
}

/**
 * The run's allowances (docs/credits.md#holds): each key's meter, holding credits from the store under this
 * invocation's own holder, renewed while the run lives; and what each spend row says of its key. `caps`: the most
 * credits this invocation may take of each key's allowance, by label (its share of the occurrence: allowance-shares.ts;
 * a key without one, what is left of the period).
 */
export function runAllowances(
  store: AllowanceStore,
  book: KeyBook,
  run: { pipeline: string; runId: string; clock: Clock; labels: readonly string[]; caps?: ReadonlyMap<string, number> | undefined },
): RunAllowances {
  const holder = randomBytes(8).toString('hex');
  const meters = new Map<string, AllowanceMeter>();
  for (const label of book.allowances.keys()) {
    const fingerprint = book.fingerprints.get(label) as string;
    const ledger: AllowanceLedger = {
      hold: (want) => store.holdAllowance({ fingerprint, holder, pipeline: run.pipeline, runId: run.runId, want, ttlMs: HOLD_TTL_MS }),
      giveBack: (period, credits) => store.giveBackAllowance(fingerprint, period, holder, credits),
    };
    meters.set(label, new AllowanceMeter({ label, ledger, clock: run.clock, cap: run.caps?.get(label) }));
  }
  // Renewed while the run lives (a busy database delays one; the next, a third of the TTL later, catches up).
  const timer = meters.size === 0 ? undefined : setInterval(() => void store.renewAllowanceHolds(holder, HOLD_TTL_MS).catch(() => undefined), HOLD_TTL_MS / 3);
  timer?.unref();
  const [only] = run.labels;
  return {
    meters,
    spendKey(label, period) {
      const name = label ?? only;
      if (name === undefined) return undefined;
      return { fingerprint: book.fingerprints.get(name) ?? null, label: name, period: period ?? null, holder: period === undefined ? null : holder };
    },
    async release() {
      clearInterval(timer);
      if (meters.size > 0) await store.releaseAllowanceHolds(holder);
    },
    stop: () => clearInterval(timer),
  };
}
