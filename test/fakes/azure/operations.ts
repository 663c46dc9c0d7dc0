// The fake flexible server's long-running operations, one at a time, as Resource Manager runs
// them (https://learn.microsoft.com/azure/azure-resource-manager/management/async-operations):
// a request that starts one is answered 202 Accepted with Azure-AsyncOperation, Location and
// Retry-After; the operation's status is InProgress until its work is done, then Succeeded or
// Failed (with an error); Location (operationResults) answers 202 while it runs, then the result.
//
// The server takes one operation at a time: while one runs, the service refuses others as busy
// (see index.ts for the codes). Work is real: it runs against the cluster when the operation's
// time has come, so what an operation changes is not there before it completes.

export type OperationKind = 'configuration' | 'restart' | 'refused';

export type Outcome =
  | { status: 'Succeeded'; /** What operationResults returns once done: a configuration's name. */ configuration?: string }
  | { status: 'Failed'; error: { code: string; message: string } };

export interface Operation {
  readonly id: string;
  readonly kind: OperationKind;
  /** A configuration write's parameter, for tests that follow one operation. */
  readonly target?: string;
  readonly startTime: string;
  endTime?: string;
  outcome?: Outcome;
}

export class ServerOperations {
  readonly #all = new Map<string, Operation>();
  /** Every operation in the order it started: what tests look at. */
  readonly log: Operation[] = [];
  #current: { operation: Operation; done: Promise<void> } | undefined;

  /** The operation the server is busy with, if any. */
  get running(): Operation | undefined {
    return this.#current?.operation;
  }

  get(id: string): Operation | undefined {
    return this.#all.get(id);
  }

  /** Starts `work` as the server's one operation: the server is busy until it settles. */
  start(kind: Exclude<OperationKind, 'refused'>, work: () => Promise<Outcome>, target?: string): Operation {
    if (this.#current) throw new Error(`fake Cloud B: an operation is already running (${this.#current.operation.kind})`);
    const operation = this.#record(kind, target);
    const done = work()
      .catch((err: unknown): Outcome => ({ status: 'Failed', error: { code: 'InternalServerError', message: String(err) } }))
      .then((outcome) => {
        operation.outcome = outcome;
        operation.endTime = new Date().toISOString();
        if (this.#current?.operation === operation) this.#current = undefined;
      });
    this.#current = { operation, done };
    return operation;
  }

  /** An operation accepted and already over: the service's refusal reported through the
   * operation rather than on the request (a busy server met by a restart, say). */
  settled(outcome: Outcome, target?: string): Operation {
    const operation = this.#record('refused', target);
    operation.outcome = outcome;
    operation.endTime = operation.startTime;
    return operation;
  }

  /** Resolves once the server runs no operation. */
  async idle(): Promise<void> {
    while (this.#current) await this.#current.done;
  }

  forget(): void {
    this.#all.clear();
    this.log.length = 0;
  }

  #record(kind: OperationKind, target: string | undefined): Operation {
    const operation: Operation = { id: crypto.randomUUID(), kind, startTime: new Date().toISOString(), ...(target && { target }) };
    this.#all.set(operation.id, operation);
    this.log.push(operation);
    return operation;
  }
}
