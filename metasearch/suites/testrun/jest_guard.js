// Loaded by the grader into every spec file's environment before its tests (jest --setupFilesAfterEnv):
// a value handed to expect() that carries a matcher hook (asymmetricMatch, jest's own way of writing
// "anything of this shape") would equal whatever the test compares it with. It is refused, and the
// test fails with a reason the grader reads. Grader-owned, outside the exercise folder.
'use strict';

const MARK = 'metasearch: a value that equals anything';
const real = globalThis.expect;

function claimsAnything(value, seen, depth) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  if (depth > 16 || seen.has(value)) return false;
  seen.add(value);
  let hook;
  try {
    hook = value.asymmetricMatch;
  } catch (error) {
    return true; // a getter that throws when read: nothing an honest value does
  }
  if (typeof hook === 'function') return true;
  let keys = [];
  try {
    keys = Reflect.ownKeys(value);
  } catch (error) {
    return true;
  }
  for (const key of keys) {
    let child;
    try {
      child = value[key];
    } catch (error) {
      continue;
    }
    if (claimsAnything(child, seen, depth + 1)) return true;
  }
  return false;
}

const guarded = new Proxy(real, {
  apply(target, self, args) {
    if (args.length > 0 && claimsAnything(args[0], new WeakSet(), 0)) {
      throw new Error(MARK);
    }
    return Reflect.apply(target, self, args);
  },
});
Object.defineProperty(globalThis, 'expect', { value: guarded, writable: false, configurable: false });

// The spec file's process object (jest's own, one per test file) cannot end the run early: a hidden
// process.exit(0) after forging the report would otherwise leave a complete-looking run.
const EXIT = 'metasearch: the code under test tried to end the test process';
for (const name of ['exit', 'reallyExit', 'abort', 'kill']) {
  try {
    Object.defineProperty(process, name, {
      value: () => {
        throw new Error(EXIT);
      },
      writable: false,
      configurable: false,
    });
  } catch (error) {
    // a property jest made unconfigurable stays as it is
  }
}
