/** Why a run cannot start as asked; the message says what to do. */
export class RunLifecycleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunLifecycleError';
  }
}
