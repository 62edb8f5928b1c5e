// Loaded by the grader into every spec file's environment before the spec and the code under test
// (jest --setupFilesAfterEnv). Grader-owned, outside the exercise folder. The code under test shares this
// realm with jest's expect and runner, so whatever they rely on is made unchangeable here, before any of
// its code runs; an attempt fails the test with a reason the grader reads (a thrown "metasearch: ..."):
//
// - values handed to expect() that carry a matcher hook (asymmetricMatch: "equals anything", however it is
//   reached), that are Maps or Sets answering expect's equality other than Map's and Set's own methods
//   do, or proxies are refused; their own getters answer expect what they answered the check (until the
//   test ends), so a getter cannot hand over a hook on a later read;
// - the test framework's globals (test, it, describe, expect, jest, hooks), their methods, the matchers
//   and custom equality testers cannot be replaced or extended;
// - the built-ins expect and the runner call (Object.is, Object.keys, Array.isArray, the methods of
//   Object.prototype, Array.prototype, Map, Set, String, the iterators ...) cannot be replaced, nor the
//   global names that lead to them; assigning such a name on one's own object still works;
// - code cannot be made from strings (Function and its async/generator kin, eval);
// - the spec file's process object cannot end the run early or load Node's built-in modules by name.
'use strict';

const { PATCH, CODE, pin: pinOn, neuterCode, guardProcess, guardWorkers } = require('./jest_guard_parts.js');

const pin = (name, value) => pinOn(globalThis, name, value);

const MARK = 'metasearch: a value that equals anything';
const real = globalThis.expect;

// What expect's equality asks a Map or a Set for (its size and its entries): one that answers other than
// Map's and Set's own methods (an iterator of its own that yields nothing) equals every Map or Set of its
// size.
const COMPARED = [
  [Map, Map.prototype, ['size', 'has', 'get', 'keys', 'values', 'entries', 'forEach', Symbol.iterator]],
  [Set, Set.prototype, ['size', 'has', 'keys', 'values', 'entries', 'forEach', Symbol.iterator]],
];
const { getOwnPropertyDescriptor, getPrototypeOf, defineProperty } = Object;
const { isProxy } = require('util').types;
const mapEntries = Map.prototype.forEach;
const setValues = Set.prototype.forEach;

function bendsComparison(value) {
  for (const [type, proto, keys] of COMPARED) {
    if (!(value instanceof type)) continue;
    for (const key of keys) {
      let holder = value;
      while (holder !== null && !getOwnPropertyDescriptor(holder, key)) holder = getPrototypeOf(holder);
      if (holder !== proto) return true;
    }
  }
  return false;
}

function claimsAnything(value, seen, depth) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  if (depth > 16 || seen.has(value)) return false;
  seen.add(value);
  if (isProxy(value)) return true; // it can answer this check one way and expect another
  try {
    if (bendsComparison(value)) return true;
  } catch (error) {
    return true; // a prototype chain that throws when walked: nothing an honest value has
  }
  // a Map's keys and values, a Set's values (written by index: this file is compiled like the spec, and
  // some array methods would bring in polyfill imports that cannot be resolved from here)
  const held = [];
  if (value instanceof Map) {
    mapEntries.call(value, (v, k) => {
      held[held.length] = k;
      held[held.length] = v;
    });
  }
  if (value instanceof Set) setValues.call(value, (v) => (held[held.length] = v));
  for (let i = 0; i < held.length && i < 4096; i++) {
    if (claimsAnything(held[i], seen, depth + 1)) return true;
  }
  // Read by descriptor, not by value: a getter can answer this check one way and expect's later reads
  // another (a matcher hook on the second read). A hook behind a getter anywhere on the value's prototype
  // chain is refused; a getter among the value's own enumerable properties (which expect reads) is read
  // once, here, and its answer is what expect reads too.
  try {
    for (let holder = value; holder !== null; holder = getPrototypeOf(holder)) {
      const hook = getOwnPropertyDescriptor(holder, 'asymmetricMatch');
      if (hook) {
        if (!('value' in hook) || typeof hook.value === 'function') return true;
        break;
      }
    }
  } catch (error) {
    return true;
  }
  let keys = [];
  try {
    keys = Reflect.ownKeys(value);
  } catch (error) {
    return true;
  }
  for (const key of keys) {
    let own;
    try {
      own = getOwnPropertyDescriptor(value, key);
    } catch (error) {
      return true;
    }
    if (!own) continue;
    let child = own.value;
    if (!('value' in own)) {
      if (!own.enumerable) continue; // expect reads enumerable properties only
      if (!own.configurable || typeof own.get !== 'function') return true;
      try {
        child = own.get.call(value);
      } catch (error) {
        return true;
      }
      // expect reads what was checked, not the getter's next answer: until the test ends, the property
      // holds this value (then the getter is put back)
      defineProperty(value, key, { value: child, writable: true, enumerable: true, configurable: true });
      replaced[replaced.length] = [value, key, own];
    }
    if (claimsAnything(child, seen, depth + 1)) return true;
  }
  return false;
}

// Getters a check replaced with what they answered, put back after each test (last replaced first).
const replaced = [];
globalThis.afterEach(() => {
  for (let i = replaced.length - 1; i >= 0; i--) {
    try {
      defineProperty(replaced[i][0], replaced[i][1], replaced[i][2]);
    } catch (error) {
      // the object was frozen since: it keeps the value
    }
  }
  replaced.length = 0;
});

const guarded = new Proxy(real, {
  apply(target, self, args) {
    if (args.length > 0 && claimsAnything(args[0], new WeakSet(), 0)) {
      throw new Error(MARK);
    }
    return Reflect.apply(target, self, args);
  },
});

// A property that reads as before and cannot be redefined. Writing it on `owner` itself throws; writing
// it on an object that inherits it makes that object's own property, as a data property would.
function lock(owner, key) {
  const desc = Object.getOwnPropertyDescriptor(owner, key);
  if (!desc || !desc.configurable) return;
  if (!('value' in desc)) {
    Object.defineProperty(owner, key, { ...desc, configurable: false });
    return;
  }
  const value = desc.value;
  Object.defineProperty(owner, key, {
    get() {
      return value;
    },
    set(next) {
      if (this === owner) throw new Error(`${PATCH}: ${String(key)}`);
      Object.defineProperty(this, key, { value: next, writable: true, enumerable: true, configurable: true });
    },
    enumerable: desc.enumerable,
    configurable: false,
  });
}

function lockAll(owner) {
  if (owner === null || (typeof owner !== 'object' && typeof owner !== 'function')) return;
  for (const key of Reflect.ownKeys(owner)) lock(owner, key);
}

// lockAll on `value` and on every object or function its properties hold (prototypes aside)
function deepLock(value, seen = new Set()) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function') || seen.has(value)) return;
  seen.add(value);
  for (const key of Reflect.ownKeys(value)) {
    const desc = Object.getOwnPropertyDescriptor(value, key);
    if (desc && 'value' in desc && key !== 'prototype') deepLock(desc.value, seen);
  }
  if (Array.isArray(value)) Object.freeze(value);
  else lockAll(value);
}

// The polyfills the exercises' babel preset injects (core-js, by usage) replace some built-ins when they
// load: all of them load now, from the exercise's own node_modules, so that what the code under test loads
// later is already in jest's module registry and changes nothing.
try {
  require(require.resolve('core-js/stable', { paths: [process.cwd()] }));
} catch (error) {
  // an exercise without core-js: the preset injects nothing from it
}

const functionKinds = neuterCode(globalThis, CODE);

// Built-ins: their global names, their static methods, their prototypes' methods and the iterators.
const BUILT_INS = [
  'Object', 'Array', 'String', 'Number', 'Boolean', 'Symbol', 'BigInt', 'Map', 'Set', 'WeakMap', 'WeakSet',
  'RegExp', 'Promise', 'Math', 'JSON', 'Reflect', 'Proxy', 'ArrayBuffer', 'DataView', 'Int8Array',
  'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
  'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'isNaN', 'isFinite', 'parseInt',
  'parseFloat',
];
lockAll(Function.prototype);
for (const kind of functionKinds.slice(1)) lockAll(Object.getPrototypeOf(kind));
for (const name of BUILT_INS) {
  const value = globalThis[name];
  if (value === undefined) continue;
  lockAll(value);
  if (typeof value === 'function' && value.prototype) lockAll(value.prototype);
  pin(name, value);
}
const typedArray = Object.getPrototypeOf(Int8Array);
lockAll(typedArray);
lockAll(typedArray.prototype);
const iterators = [[][Symbol.iterator](), new Map()[Symbol.iterator](), new Set()[Symbol.iterator](), ''[Symbol.iterator]()];
for (const iterator of iterators) {
  lockAll(Object.getPrototypeOf(iterator));
  lockAll(Object.getPrototypeOf(Object.getPrototypeOf(iterator)));
}

// The test framework: globals, their methods, the matchers and the equality testers.
const matchersHolder = globalThis[Symbol.for('$$jest-matchers-object')];
if (matchersHolder) {
  for (const key of ['matchers', 'customEqualityTesters']) {
    deepLock(matchersHolder[key]);
    lock(matchersHolder, key);
  }
}
deepLock(real);
pin('expect', guarded);
const FRAMEWORK = [
  'test', 'it', 'describe', 'xtest', 'xit', 'xdescribe', 'fit', 'fdescribe', 'beforeAll', 'beforeEach',
  'afterAll', 'afterEach', 'jest', 'pending', 'fail',
];
for (const name of FRAMEWORK) {
  if (!(name in globalThis)) continue;
  const value = globalThis[name];
  if (name === 'jest') lockAll(value);
  else deepLock(value);
  pin(name, value);
}

// The spec file's process object (jest's own, one per test file): no early end (a hidden process.exit(0)
// after forging the report would otherwise leave a complete-looking run), no built-in modules by name.
guardProcess(process);

// Worker threads run outside this realm: each starts with jest_worker_guard.js loaded first.
guardWorkers(require('worker_threads'), require('path').join(__dirname, 'jest_worker_guard.js'));
