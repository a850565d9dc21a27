import type { IncomingHttpHeaders } from 'node:http';
import { ValidationError } from '../errors/validation-error.ts';
import type { ResolvedKey } from './options.ts';
import { KeyAccount } from './plans.ts';
import type { SimulatorStats } from './types.ts';

/** The simulated keys' accounts, found by name (stats, updates), by `x-api-key` and by bearer token. */
export class KeyRing {
  readonly #clock: () => number;
  readonly #byName = new Map<string, KeyAccount>();
  readonly #byKey = new Map<string, KeyAccount>();
  readonly #byToken = new Map<string, KeyAccount>();

  constructor(keys: readonly ResolvedKey[], clock: () => number) {
    this.#clock = clock;
    for (const plan of keys) {
      const account = new KeyAccount(plan, clock());
      this.#byName.set(plan.name, account);
      if (plan.key !== undefined) this.#byKey.set(plan.key, account);
      if (plan.token !== undefined) this.#byToken.set(plan.token, account);
    }
  }

  /** The account a request's credentials name, if any. */
  authenticate(headers: IncomingHttpHeaders): KeyAccount | undefined {
    const key = headers['x-api-key'];
    if (typeof key === 'string' && key !== '') return this.#byKey.get(key);
    const auth = headers.authorization;
    const match = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth) : null;
    return match?.[1] ? this.#byToken.get(match[1]) : undefined;
  }

  update(name: string, patch: Partial<ResolvedKey>): void {
    const account = this.#byName.get(name);
    if (!account) throw new ValidationError('Invalid key update', [{ path: 'name', message: `no simulated key named "${name}"` }]);
    account.update(patch, this.#clock());
  }

  credits(): SimulatorStats['credits'] {
    return Object.fromEntries([...this.#byName].map(([name, account]) => [name, { debited: account.debited, remaining: account.remaining }]));
  }
}
