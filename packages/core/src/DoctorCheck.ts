/**
 * One line of `hermes-sandbox doctor`'s report, whichever runtime it checks (Docker's engine in the
 * CLI, a cluster in @hermes-sandbox/kubernetes's Doctor): what was checked, whether it holds,
 * whether it must, what was found, and how to fix it.
 */
export interface DoctorCheck {
  readonly name: string
  readonly ok: boolean
  readonly required: boolean
  readonly detail: string
  readonly fix?: string
}
