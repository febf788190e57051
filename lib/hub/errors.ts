/** A pull that cannot go on: the message is one line for the user, with what to do. */
export class PullError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PullError";
  }
}
