// Every error class of webdata-etl, in one home: the API's failures (WebDataError and its classes), bad input
// (ValidationError, UsageError), and a run's own (StageContractError, RunLifecycleError, OutputError, LeaseHeldError).
export { WebDataError, type FailureKind, type WebDataErrorDetails } from './web-data-error.ts';
export { BadRequestError, AuthenticationError, PlanError, RateLimitError, ServerError, UnexpectedStatusError } from './status-errors.ts';
export { NetworkError, TimeoutError, MalformedResponseError, AbortedError } from './transport-errors.ts';
export { ValidationError, type ValidationIssue } from './validation-error.ts';
export { UsageError } from './usage-error.ts';
export { StageContractError } from './stage-contract-error.ts';
export { RunLifecycleError } from './run-lifecycle-error.ts';
export { OutputError, type OutputProblem } from './output-error.ts';
export { LeaseHeldError, type LeaseHolder } from './lease-held-error.ts';
export { UnstorablePageError } from './unstorable-page-error.ts';
