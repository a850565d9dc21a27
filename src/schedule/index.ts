export { createScheduler, type Scheduler, type SchedulerStats, type SchedulerEvent, type Outcome, type Work, type StopInfo, type Answered } from './scheduler.ts';
export { type SchedulerOptions, type Rate, schedulerOptionsSchema } from './options.ts';
export { classify, type Disposition, type StopReason } from './classify.ts';
export { createCreditMeter, type CreditMeter, type CreditSnapshot, type Charge } from './credit-meter.ts';
export { createPacer, type Pacer } from './pacer.ts';
export { type Clock, systemClock, virtualClock, type VirtualClock } from './clock.ts';
export { readRateLimitHeaders, type RateLimitHint } from './rate-limit-headers.ts';
export { estimate, type Estimate, type WorkUnit } from './estimate.ts';
