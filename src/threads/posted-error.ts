import * as errors from '../errors/index.ts';

/** An error as it crosses threads: its class by name, its own fields (a structured clone keeps neither). */
export interface PostedError {
  name: string;
  message: string;
  stack?: string | undefined;
  fields: Record<string, unknown>;
}

/** Posts an error with its class's name and its own fields. */
export function postedError(error: unknown): PostedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), fields: {} };
  // JSON keeps what a summary or a log would; the key is never in an error's fields (redacted where they are made).
  let fields: Record<string, unknown> = {};
  try {
    fields = JSON.parse(JSON.stringify({ ...error })) as Record<string, unknown>;
  } catch {
    // A field JSON cannot hold (a BigInt, a cycle): the class and the message still cross.
  }
  return { name: error.name, message: error.message, stack: error.stack, fields };
}

/** The error again, of its webdata-etl class where it has one, so that `instanceof` works in the parent thread. */
export function rebuilt(posted: PostedError): Error {
  const Class = (errors as Record<string, unknown>)[posted.name];
  const prototype = typeof Class === 'function' && Class.prototype instanceof Error ? (Class.prototype as Error) : Error.prototype;
  const error = Object.assign(Object.create(prototype) as Error, posted.fields);
  Object.defineProperties(error, {
    name: { value: posted.name, writable: true, configurable: true },
    message: { value: posted.message, writable: true, configurable: true },
    stack: { value: posted.stack, writable: true, configurable: true },
  });
  return error;
}
