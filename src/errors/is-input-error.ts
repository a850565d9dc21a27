/**
 * An error that already says what is wrong with the user's input. By name, not class: a pipeline file may load the
 * built package while the command line runs from source, and each has its own classes.
 */
export function isInputError(error: unknown): error is Error {
  const name = (error as { name?: unknown } | null)?.name;
  return error instanceof Error && (name === 'ValidationError' || name === 'UsageError');
}
