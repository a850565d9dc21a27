export { createScheduler } from './scheduler.ts';
export type { Scheduler, SchedulerStats, SchedulerEvent, Outcome, Work, StopInfo, Answered } from './types.ts';
export { type SchedulerOptions, type Rate, schedulerOptionsSchema } from './options.ts';
export { classify, type Disposition, type StopReason } from './classify.ts';
export { createCreditMeter, type CreditMeter, type CreditSnapshot, type Charge } from './credit-meter.ts';
export { createPacer, type Pacer } from './pacer.ts';
export { type Clock, systemClock, virtualClock, type VirtualClock } from './clock.ts';
export { readRateLimitHeaders, type RateLimitHint } from './rate-limit-headers.ts';
export { estimate, type Estimate, type WorkUnit } from './estimate.ts';
