/**
 * At most one in-process reader resolves `auto` to OpenGL ES (backend_choice.ts). Readers are
 * worker threads of the server process, and processes holding several OpenGL ES (llvmpipe)
 * devices have crashed at teardown; a backend named explicitly is the operator's choice and
 * not counted. The slot is taken when a reader's worker starts and given back when it is not
 * used (the reader came up on another backend) or when the worker exits. Main thread only.
 */
let holder: string | null = null;

/** Takes the slot for `readerId` if it is free (or already its own); true when it holds it. */
export function takeGlSlot(readerId: string): boolean {
  if (holder !== null && holder !== readerId) return false;
  holder = readerId;
  return true;
}

/** Gives the slot back if `readerId` holds it. */
export function releaseGlSlot(readerId: string): void {
  if (holder === readerId) holder = null;
}

/** The reader holding the slot (tests, status). */
export function glSlotHolder(): string | null {
  return holder;
}
