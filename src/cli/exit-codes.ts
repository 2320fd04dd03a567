// mmctl's exit codes: what a script can rely on (README "mmctl").
export const exitCodes = {
  ok: 0,
  /** Anything not named below. */
  failed: 1,
  /** Bad arguments or options. */
  usage: 2,
  /** No workflow for that model. */
  unknownModel: 3,
  /** Temporal did not answer. */
  temporalUnreachable: 4,
  /** `resync --wait` saw no outcome in time. */
  timeout: 5,
} as const;

/** A failure mmctl reports in one line, with its exit code. */
export class CliFailure extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
