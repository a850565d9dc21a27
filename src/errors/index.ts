// Every error class of webdata-etl, in one home, one to a file, all extending WebDataEtlError: the API's failures
// (WebDataError and its classes), bad input (ValidationError, UsageError), and a run's own (StageContractError,
// RunLifecycleError, OutputError, LeaseHeldError, UnstorablePageError, HeapLimitError; SeriesLostError and
// WorkerExpiredError in a distributed run; RunAtWorkError and RunEndedError for a scheduled occurrence's run).
export { WebDataEtlError } from './web-data-etl-error.ts';
export { WebDataError, type FailureKind, type WebDataErrorDetails } from './web-data-error.ts';
// Failures the server answered with a status: each class says how a caller should react to it.
export { BadRequestError } from './bad-request-error.ts';
export { AuthenticationError } from './authentication-error.ts';
export { PlanError } from './plan-error.ts';
export { RateLimitError } from './rate-limit-error.ts';
export { ServerError } from './server-error.ts';
export { UnexpectedStatusError } from './unexpected-status-error.ts';
// Failures of the exchange itself: no answer, a cut one, one that breaks the contract, or the caller's abort.
export { NetworkError } from './network-error.ts';
export { TimeoutError } from './timeout-error.ts';
export { MalformedResponseError } from './malformed-response-error.ts';
export { AbortedError } from './aborted-error.ts';
// Bad input, said before anything is sent.
export { ValidationError, type ValidationIssue } from './validation-error.ts';
export { UsageError } from './usage-error.ts';
// A run's own.
export { StageContractError } from './stage-contract-error.ts';
export { RunLifecycleError } from './run-lifecycle-error.ts';
export { OutputError, type OutputProblem } from './output-error.ts';
export { LeaseHeldError, type LeaseHolder } from './lease-held-error.ts';
export { RunAtWorkError } from './run-at-work-error.ts';
export { RunEndedError } from './run-ended-error.ts';
export { UnstorablePageError } from './unstorable-page-error.ts';
export { HeapLimitError } from './heap-limit-error.ts';
export { SeriesLostError } from './series-lost-error.ts';
export { WorkerExpiredError } from './worker-expired-error.ts';
