import { WebDataError, type WebDataErrorDetails } from './web-data-error.ts';

/** 402 or 403: plan, permission, credits, billing or endpoint availability. */
export class PlanError extends WebDataError {
  constructor(message: string, details: WebDataErrorDetails) {
    super('plan', false, message, details);
  }
}
