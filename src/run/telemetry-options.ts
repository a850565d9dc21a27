import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';

/**
 * What a run's telemetry may carry beyond its numbers (`run(pipeline, { telemetry })`). Queries can be sensitive (a
 * person's name, a client's product) and traces go to a collector, often someone else's: their text stays out unless
 * the application asks for it.
 */
export const telemetryOptionsSchema = z.strictObject({
  /**
   * Each series' query on its span (`webdata_etl.series.query`, and `webdata_etl.series.id`, which holds it), and
   * error and stop messages on the run's span: a message can quote a page's key or the server's answer, and either
   * can hold a query.
   */
  queryText: z.boolean({ error: 'must be true or false' }).default(false),
});

export type TelemetryOptions = z.input<typeof telemetryOptionsSchema>;
export type Telemetry = z.output<typeof telemetryOptionsSchema>;

/** The run's `telemetry` option, checked (a misspelt field is refused, not ignored) with its defaults. */
export function telemetryOf(options: TelemetryOptions | undefined): Telemetry {
  return ValidationError.parse(telemetryOptionsSchema, options ?? {}, 'Invalid run options', 'telemetry');
}
