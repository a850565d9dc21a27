import type { ResolvedKey } from './options.ts';

/** Why a key's plan turns a request away, or nothing. */
export type Refusal =
  | { status: 401; reason: 'revoked' }
  | { status: 403; reason: 'suspended' | 'endpoint' }
  | { status: 429; reason: 'rate' | 'concurrency' | 'quota'; retryAfterMs: number }
  | { status: 402; reason: 'credits' };

/**
 * A key and its plan at run time: the token bucket, requests in flight, the quota window and the credit
 * balance. Credits are reserved when a request is accepted and debited only when it is answered with a 2xx,
 * so concurrent requests can never take a balance below zero.
 */
export class KeyAccount {
  plan: ResolvedKey;
  debited = 0;
  private reserved = 0;
  private tokens: number;
  private refilledAt: number;
  private inFlight = 0;
  /** Requests admitted so far (for `revokeAfter`). */
  private admitted = 0;
  private windowStart: number;
  private windowCount = 0;

  constructor(plan: ResolvedKey, now: number) {
    this.plan = plan;
    this.tokens = plan.burst;
    this.refilledAt = now;
    this.windowStart = now;
  }

  get remaining(): number | null {
    return this.plan.credits === null ? null : this.plan.credits - this.debited;
  }

  /** Changes the plan mid-run (tests: a key revoked, credits run out, a quota lowered). */
  update(patch: Partial<ResolvedKey>, now: number): void {
    this.plan = { ...this.plan, ...patch };
    if (patch.burst !== undefined || patch.ratePerSecond !== undefined) {
      this.tokens = Math.min(this.tokens, this.plan.burst);
      this.refilledAt = now;
    }
  }

  /** Admits a request (taking a token, a concurrency slot, a quota unit and reserving its weight) or refuses it. */
  admit(path: string, weight: number, now: number): Refusal | null {
    // Revoked where its plan says, as a key is withdrawn between two of its requests.
    if (this.plan.revokeAfter !== null && this.admitted >= this.plan.revokeAfter) this.plan = { ...this.plan, status: 'revoked' };
    const { plan } = this;
    if (plan.status === 'revoked') return { status: 401, reason: 'revoked' };
    if (plan.status === 'suspended') return { status: 403, reason: 'suspended' };
    if (plan.endpoints && !plan.endpoints.includes(path)) return { status: 403, reason: 'endpoint' };

    if (plan.quota) {
      if (now - this.windowStart >= plan.quota.windowMs) {
        const windows = Math.floor((now - this.windowStart) / plan.quota.windowMs);
        this.windowStart += windows * plan.quota.windowMs;
        this.windowCount = 0;
      }
      if (this.windowCount >= plan.quota.requests) {
        return { status: 429, reason: 'quota', retryAfterMs: this.windowStart + plan.quota.windowMs - now };
      }
    }
    if (plan.maxConcurrent !== null && this.inFlight >= plan.maxConcurrent) {
      return { status: 429, reason: 'concurrency', retryAfterMs: 1000 };
    }
    if (plan.ratePerSecond !== null) {
      this.tokens = Math.min(plan.burst, this.tokens + ((now - this.refilledAt) / 1000) * plan.ratePerSecond);
      this.refilledAt = now;
      if (this.tokens < 1) return { status: 429, reason: 'rate', retryAfterMs: ((1 - this.tokens) / plan.ratePerSecond) * 1000 };
    }
    const remaining = this.remaining;
    if (remaining !== null && remaining - this.reserved < weight) return { status: 402, reason: 'credits' };

    if (plan.ratePerSecond !== null) this.tokens -= 1;
    if (plan.quota) this.windowCount += 1;
    this.inFlight += 1;
    this.reserved += weight;
    this.admitted += 1;
    return null;
  }

  /** The quota window as rate-limit headers describe it, or nothing when the key has no quota. */
  window(now: number): { limit: number; remaining: number; resetMs: number; windowMs: number } | undefined {
    const { quota } = this.plan;
    if (!quota) return undefined;
    // The window has ended: the next request would begin a new one, with the whole quota.
    const windowEnded = now - this.windowStart >= quota.windowMs;
    return {
      limit: quota.requests,
      remaining: windowEnded ? quota.requests : Math.max(0, quota.requests - this.windowCount),
      resetMs: windowEnded ? quota.windowMs : this.windowStart + quota.windowMs - now,
      windowMs: quota.windowMs,
    };
  }

  /** Ends an admitted request: its reservation is debited if it was answered with a 2xx, released otherwise. */
  settle(weight: number, charged: boolean): void {
    this.inFlight -= 1;
    this.reserved -= weight;
    if (charged) this.debited += weight;
  }
}
