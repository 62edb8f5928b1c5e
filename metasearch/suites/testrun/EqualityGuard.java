package metasearch;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.lang.reflect.Method;
import java.security.ProtectionDomain;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A grader-owned Java agent for the JUnit run: every {@code equals(Object)} defined in the code under test
 * (classes compiled from the solution's source files, named by the agent's argument) is wrapped, so that
 * whenever it answers "equal" it is asked once more, about values made up on the spot that nothing honest
 * equals (a new {@code Object}; a near miss of a string, number or collection; a twin of one of the
 * solution's own values with every field changed), and about values the class's own constructors make
 * from arguments drawn at random. An equals that says "equal" to one of the first, to two twins, or in
 * half the answers about the last (which differ from each other and from both compared values, field by
 * field), twice over, is a value that passes every equality assertion: the agent says so on the standard error, and the grader
 * flags the run. The original method is kept, renamed and private, so the code under test cannot call
 * around the wrapper by name.
 */
public final class EqualityGuard implements ClassFileTransformer {
    static final String RENAMED = "equals$metasearch";
    static final String EQUALS = "(Ljava/lang/Object;)Z";
    static final String REFUSAL = "metasearch: the code under test tried to make a value that equals anything: ";
    private static final ThreadLocal<Boolean> BUSY = ThreadLocal.withInitial(() -> false);
    private static final Set<String> REPORTED = java.util.Collections.synchronizedSet(new HashSet<>());
    private final Set<String> sources;

    private EqualityGuard(Set<String> sources) {
        this.sources = sources;
    }

    /** {@code args}: the solution's source file names, comma-separated ({@code Clock.java,Util.java}). */
    public static void premain(String args, Instrumentation instrumentation) {
        Set<String> sources = new HashSet<>(Arrays.asList((args == null ? "" : args).split(",")));
        instrumentation.addTransformer(new EqualityGuard(sources));
    }

    @Override
    public byte[] transform(
            ClassLoader loader, String name, Class<?> redefined, ProtectionDomain domain, byte[] bytes) {
        try {
            ClassReader reader = new ClassReader(bytes);
            String[] source = {null};
            String[] parent = {null};
            boolean[] defines = {false};
            reader.accept(new ClassVisitor(Opcodes.ASM9) {
                @Override
                public void visit(int version, int access, String name, String sig, String sup, String[] faces) {
                    parent[0] = (access & (Opcodes.ACC_INTERFACE | Opcodes.ACC_ENUM)) == 0 ? sup : null;
                }

                @Override
                public void visitSource(String file, String debug) {
                    source[0] = file;
                }

                @Override
                public MethodVisitor visitMethod(int access, String method, String desc, String sig, String[] ex) {
                    defines[0] |= isEquals(access, method, desc);
                    return null;
                }
            }, ClassReader.SKIP_CODE | ClassReader.SKIP_FRAMES);
            if (source[0] == null || !sources.contains(source[0])) {
                return null;
            }
            String inherited = defines[0] ? null : libraryEquals(parent[0]);
            if (!defines[0] && inherited == null) {
                return null;
            }
            ClassWriter writer = new ClassWriter(reader, 0);
            reader.accept(new Wrapper(writer, inherited), 0);
            return writer.toByteArray();
        } catch (RuntimeException exc) {
            System.err.println(REFUSAL + name + " (could not be checked: " + exc + ")");
            return null;
        }
    }

    /**
     * {@code parent} (internal name) when it is a JDK class whose {@code equals} is not {@code Object}'s
     * and may be overridden (a map's, a list's): a solution class that extends it compares by that
     * equals, which calls methods the solution can override ({@code entrySet}, {@code size}), so it is
     * wrapped too. Else null (solution classes are wrapped where they define equals).
     */
    static String libraryEquals(String parent) {
        if (parent == null || !parent.startsWith("java/")) {
            return null;
        }
        try {
            Method equals = Class.forName(parent.replace('/', '.'), false, null).getMethod("equals", Object.class);
            int access = equals.getModifiers();
            return equals.getDeclaringClass() != Object.class && !java.lang.reflect.Modifier.isFinal(access)
                    && !java.lang.reflect.Modifier.isAbstract(access) ? parent : null;
        } catch (ReflectiveOperationException | LinkageError | RuntimeException exc) {
            return null;
        }
    }

    static boolean isEquals(int access, String method, String desc) {
        return method.equals("equals") && desc.equals(EQUALS) && (access & Opcodes.ACC_ABSTRACT) == 0
                && (access & Opcodes.ACC_STATIC) == 0;
    }

    /** Keeps {@code equals} under a private name and puts a wrapper that calls it, then {@link #after}; for
     * a class that inherits a JDK class's equals ({@code inherited}), adds both: the private one calls it. */
    static final class Wrapper extends ClassVisitor {
        private final String inherited;
        private String owner;

        Wrapper(ClassVisitor next, String inherited) {
            super(Opcodes.ASM9, next);
            this.inherited = inherited;
        }

        @Override
        public void visitEnd() {
            if (inherited != null) {
                wrap(super.visitMethod(Opcodes.ACC_PUBLIC, "equals", EQUALS, null, null));
                MethodVisitor hidden = super.visitMethod(
                        Opcodes.ACC_PRIVATE | Opcodes.ACC_SYNTHETIC, RENAMED, EQUALS, null, null);
                hidden.visitCode();
                hidden.visitVarInsn(Opcodes.ALOAD, 0);
                hidden.visitVarInsn(Opcodes.ALOAD, 1);
                hidden.visitMethodInsn(Opcodes.INVOKESPECIAL, inherited, "equals", EQUALS, false);
                hidden.visitInsn(Opcodes.IRETURN);
                hidden.visitMaxs(2, 2);
                hidden.visitEnd();
            }
            super.visitEnd();
        }

        private void wrap(MethodVisitor wrapper) {
            wrapper.visitCode();
            wrapper.visitVarInsn(Opcodes.ALOAD, 0);
            wrapper.visitVarInsn(Opcodes.ALOAD, 1);
            wrapper.visitVarInsn(Opcodes.ALOAD, 0);
            wrapper.visitVarInsn(Opcodes.ALOAD, 1);
            wrapper.visitMethodInsn(Opcodes.INVOKESPECIAL, owner, RENAMED, EQUALS, false);
            wrapper.visitMethodInsn(Opcodes.INVOKESTATIC, "metasearch/EqualityGuard", "after",
                    "(Ljava/lang/Object;Ljava/lang/Object;Z)Z", false);
            wrapper.visitInsn(Opcodes.IRETURN);
            wrapper.visitMaxs(4, 2);
            wrapper.visitEnd();
        }

        @Override
        public void visit(int version, int access, String name, String sig, String parent, String[] faces) {
            owner = name;
            super.visit(version, access, name, sig, parent, faces);
        }

        @Override
        public MethodVisitor visitMethod(int access, String method, String desc, String sig, String[] ex) {
            if (!isEquals(access, method, desc)) {
                return super.visitMethod(access, method, desc, sig, ex);
            }
            wrap(super.visitMethod(access & ~Opcodes.ACC_SYNCHRONIZED, method, desc, sig, ex));
            int hidden = (access & ~(Opcodes.ACC_PUBLIC | Opcodes.ACC_PROTECTED)) | Opcodes.ACC_PRIVATE
                    | Opcodes.ACC_SYNTHETIC;
            return super.visitMethod(hidden, RENAMED, desc, sig, ex);
        }
    }

    /** Called by every wrapped equals with its answer, which it returns unchanged. */
    public static boolean after(Object self, Object other, boolean equal) {
        if (!equal || BUSY.get()) {
            return equal;
        }
        BUSY.set(true);
        try {
            Method original = original(self.getClass());
            if (original == null) {
                return equal;
            }
            boolean lies = false;
            for (Object probe : probes(other)) {
                lies |= asks(original, self, probe);
            }
            lies = lies || equalToTwins(original, self, other) || equalToMost(original, self, other)
                    && equalToMost(original, self, other); // confirmed with values made afresh
            if (lies && REPORTED.add(original.getDeclaringClass().getName())) {
                System.err.println(REFUSAL + original.getDeclaringClass().getName() + ".equals");
                System.err.flush();
            }
        } finally {
            BUSY.set(false);
        }
        return equal;
    }

    /** What the wrapped equals {@code original} answers about {@code self} and {@code other}. */
    static boolean asks(Method original, Object self, Object other) {
        try {
            return (Boolean) original.invoke(self, other);
        } catch (ReflectiveOperationException | RuntimeException exc) {
            return false; // a cast that fails is an honest "not equal"
        }
    }

    /**
     * Whether an equals says "equal" to values its class's constructors made from arguments drawn at
     * random, field by field unlike each other and both compared values, in at least half the answers of
     * one kind of question: {@code self} asked about each; each asked about the next; each asked about
     * {@code other}. Values made by the constructors the tests call cannot be told from the tests' own (a
     * marker field a constructor sets is set in both; the questions have many receivers), and the arguments
     * are mostly near the numbers in the compared values or as small as a test's, so an equals that says
     * "equal" only to values in the tests' range says so here too. An honest equals says "equal" only
     * where two of them fall in one class of equal values (a fraction kept unreduced: 2/4 and 1/2), a few
     * answers in a dozen.
     */
    static boolean equalToMost(Method original, Object self, Object other) {
        Set<String> compared = new HashSet<>(Arrays.asList(Fingerprint.of(self), Fingerprint.of(other)));
        List<Number> near = new ArrayList<>();
        Fingerprint.numbers(self, near);
        Fingerprint.numbers(other, near);
        List<Object> made = distinct(Made.by(self.getClass(), near), compared);
        int[] equal = new int[3];
        for (int i = 0; i < made.size(); i++) {
            equal[0] += asks(original, self, made.get(i)) ? 1 : 0;
            equal[1] += i > 0 && asks(original, made.get(i - 1), made.get(i)) ? 1 : 0;
        }
        Method theirs = other == null ? null : original(other.getClass());
        List<Object> others = theirs == null ? List.of()
                : other.getClass() == self.getClass() ? made : distinct(Made.by(other.getClass(), near), compared);
        for (Object value : others) {
            equal[2] += asks(theirs, value, other) ? 1 : 0;
        }
        return most(equal[0], made.size()) || most(equal[1], made.size() - 1) || most(equal[2], others.size());
    }

    static boolean most(int equal, int asked) {
        return equal >= 3 && 2 * equal >= asked;
    }

    /** {@code made}, each state once, none in the state of a compared value. */
    static List<Object> distinct(List<Object> made, Set<String> compared) {
        Set<String> seen = new HashSet<>(compared);
        List<Object> kept = new ArrayList<>();
        for (Object value : made) {
            if (seen.add(Fingerprint.of(value))) {
                kept.add(value);
            }
        }
        return kept;
    }

    /** The wrapped equals that {@code type}'s instances use: the nearest class that defines one (looked up
     * once per class: every "equal" answer asks). */
    static Method original(Class<?> type) {
        return ORIGINALS.get(type).orElse(null);
    }

    private static final ClassValue<java.util.Optional<Method>> ORIGINALS = new ClassValue<>() {
        @Override
        protected java.util.Optional<Method> computeValue(Class<?> type) {
            for (Class<?> c = type; c != null; c = c.getSuperclass()) {
                try {
                    Method method = c.getDeclaredMethod(RENAMED, Object.class);
                    method.setAccessible(true);
                    return java.util.Optional.of(method);
                } catch (NoSuchMethodException exc) {
                    // not this one
                }
            }
            return java.util.Optional.empty();
        }
    };

    /**
     * Values nothing honest equals: a new object; a near miss of {@code other} when it is a string, a number,
     * a collection (one element more; one element changed) or a map (one value changed).
     */
    static List<Object> probes(Object other) {
        List<Object> probes = new ArrayList<>();
        probes.add(new Object());
        ThreadLocalRandom random = ThreadLocalRandom.current();
        int offset = random.nextInt(1, 1000) * (random.nextBoolean() ? 1 : -1);
        if (other instanceof CharSequence text) {
            probes.add(nearMiss(text.toString(), random));
        } else if (other instanceof Integer n) {
            probes.add(n + offset);
        } else if (other instanceof Long n) {
            probes.add(n + offset);
        } else if (other instanceof Double n) {
            probes.add(n + offset);
        } else if (other instanceof Float n) {
            probes.add(n + offset);
        } else if (other instanceof java.util.Collection<?> items) {
            List<Object> longer = new ArrayList<>(items);
            longer.add(new Object());
            probes.add(longer);
            if (!items.isEmpty()) {
                probes.add(sameSize(items, random));
            }
        } else if (other instanceof java.util.Map<?, ?> map && !map.isEmpty()) {
            java.util.Map<Object, Object> changed = new java.util.HashMap<>(map);
            Object key = changed.keySet().iterator().next();
            changed.put(key, nearValue(changed.get(key), random));
            probes.add(changed);
        }
        return probes;
    }

    /** A copy of {@code items}, as a list or a set like it, with one element a near miss of itself: an
     * equals that compares only sizes, or never looks at the elements, says "equal" to it. */
    static java.util.Collection<Object> sameSize(java.util.Collection<?> items, ThreadLocalRandom random) {
        List<Object> elements = new ArrayList<>(items);
        int at = random.nextInt(elements.size());
        elements.set(at, nearValue(elements.get(at), random));
        if (items instanceof Set<?>) {
            Set<Object> set = new java.util.LinkedHashSet<>(elements);
            if (set.size() < items.size()) {
                set.add(new Object()); // the near miss was already an element
            }
            return set;
        }
        return elements;
    }

    /** Something close to {@code value} that no honest equals takes for it. */
    static Object nearValue(Object value, ThreadLocalRandom random) {
        int offset = random.nextInt(1, 1000);
        if (value instanceof CharSequence text) {
            return nearMiss(text.toString(), random);
        } else if (value instanceof Integer n) {
            return n + offset;
        } else if (value instanceof Long n) {
            return n + offset;
        } else if (value instanceof Double n) {
            return n + offset;
        } else if (value instanceof Boolean b) {
            return !b;
        } else if (value instanceof java.util.Optional<?> optional) {
            return optional.isPresent() ? java.util.Optional.empty() : java.util.Optional.of(new Object());
        } else if (value instanceof java.util.Collection<?> items) {
            List<Object> longer = new ArrayList<>(items);
            longer.add(new Object());
            return longer;
        }
        return new Object();
    }

    /** Whether an equals says "equal" to two twins of {@code other} (when it is one of the solution's own
     * values), made without a constructor, every field changed: an equals that only checks the class or a
     * marker only a constructor sets. Two: one could be equal by chance, where a value is kept unreduced
     * (2/4 and 1/2) and the changes happen to keep its proportions. */
    static boolean equalToTwins(Method original, Object self, Object other) {
        if (other == null || original(other.getClass()) == null) {
            return false;
        }
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int i = 0; i < 2; i++) {
            Object twin = twin(other, random);
            if (twin == null || !asks(original, self, twin)) {
                return false;
            }
        }
        return true;
    }

    static String nearMiss(String text, ThreadLocalRandom random) {
        char letter = (char) ('a' + random.nextInt(26));
        int at = random.nextInt(text.length() + 1);
        return text.substring(0, at) + letter + text.substring(at);
    }

    /** A new instance of {@code other}'s class, no constructor run, each field set unlike {@code other}'s
     * (numbers moved, booleans flipped, strings changed, other references null); null unless it has fields
     * and every one of them could be made to differ (a record's cannot be set; a null stays null). */
    static Object twin(Object other, ThreadLocalRandom random) {
        try {
            Object twin = Allocator.ALLOCATE.invoke(Allocator.UNSAFE, other.getClass());
            List<java.lang.reflect.Field> fields = instanceFields(other.getClass());
            for (java.lang.reflect.Field field : fields) {
                field.setAccessible(true);
                Object was = field.get(other);
                if (!field.getType().isPrimitive() && field.getType() != String.class && was == null) {
                    return null;
                }
                field.set(twin, unlike(field.getType(), was, random));
            }
            return fields.isEmpty() ? null : twin;
        } catch (ReflectiveOperationException | RuntimeException | LinkageError exc) {
            return null; // LinkageError: no Unsafe to make twins with (Allocator did not load)
        }
    }

    /** The non-static fields of {@code type} and of its superclasses below {@code Object}. */
    static List<java.lang.reflect.Field> instanceFields(Class<?> type) {
        List<java.lang.reflect.Field> found = new ArrayList<>();
        for (Class<?> c = type; c != null && c != Object.class; c = c.getSuperclass()) {
            for (java.lang.reflect.Field field : c.getDeclaredFields()) {
                if (!java.lang.reflect.Modifier.isStatic(field.getModifiers())) {
                    found.add(field);
                }
            }
        }
        return found;
    }

    /** {@code sun.misc.Unsafe.allocateInstance}, found once, the first time a twin is made. */
    static final class Allocator {
        static final Object UNSAFE;
        static final Method ALLOCATE;

        static {
            try {
                Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
                java.lang.reflect.Field theUnsafe = unsafeClass.getDeclaredField("theUnsafe");
                theUnsafe.setAccessible(true);
                UNSAFE = theUnsafe.get(null);
                ALLOCATE = unsafeClass.getMethod("allocateInstance", Class.class);
            } catch (ReflectiveOperationException exc) {
                throw new IllegalStateException(exc);
            }
        }
    }

    /** Values of a class made by its own non-private constructors, from arguments drawn at random. */
    static final class Made {
        static final int PER_CONSTRUCTOR = 8;
        static final int MOST = 12;

        static List<Object> by(Class<?> type, List<Number> near) {
            List<Object> made = new ArrayList<>();
            if (java.lang.reflect.Modifier.isAbstract(type.getModifiers()) || type.isEnum()) {
                return made;
            }
            ThreadLocalRandom random = ThreadLocalRandom.current();
            for (java.lang.reflect.Constructor<?> constructor : CONSTRUCTORS.get(type)) {
                for (int i = 0; i < PER_CONSTRUCTOR && made.size() < MOST; i++) {
                    Object[] arguments = new Object[constructor.getParameterCount()];
                    Class<?>[] types = constructor.getParameterTypes();
                    for (int k = 0; k < arguments.length; k++) {
                        arguments[k] = drawn(types[k], near, random);
                    }
                    try {
                        made.add(constructor.newInstance(arguments));
                    } catch (ReflectiveOperationException | RuntimeException | LinkageError exc) {
                        // arguments it refuses (a zero denominator): an honest constructor's right
                    }
                }
            }
            return made;
        }

        /** The non-private constructors with parameters that values can be drawn for; found once. */
        private static final ClassValue<List<java.lang.reflect.Constructor<?>>> CONSTRUCTORS = new ClassValue<>() {
            @Override
            protected List<java.lang.reflect.Constructor<?>> computeValue(Class<?> type) {
                List<java.lang.reflect.Constructor<?>> usable = new ArrayList<>();
                for (java.lang.reflect.Constructor<?> constructor : type.getDeclaredConstructors()) {
                    if (java.lang.reflect.Modifier.isPrivate(constructor.getModifiers())
                            || constructor.getParameterCount() == 0
                            || !Arrays.stream(constructor.getParameterTypes()).allMatch(Made::drawable)) {
                        continue;
                    }
                    try {
                        constructor.setAccessible(true);
                        usable.add(constructor);
                    } catch (RuntimeException exc) {
                        // not ours to call
                    }
                }
                return usable;
            }
        };

        static boolean drawable(Class<?> type) {
            Class<?> element = type.isArray() ? type.getComponentType() : type;
            return element.isPrimitive() || element == String.class || Number.class.isAssignableFrom(element)
                    && element.getName().startsWith("java.") || element == Boolean.class
                    || element == Character.class || element.isEnum() && element.getEnumConstants().length > 0;
        }

        /** A value of {@code type}: numbers half the time near one of {@code near} (the compared values'),
         * else mostly as small as a test's, some larger. */
        static Object drawn(Class<?> type, List<Number> near, ThreadLocalRandom random) {
            if (type.isArray()) {
                Object array = java.lang.reflect.Array.newInstance(type.getComponentType(), random.nextInt(1, 5));
                for (int i = 0; i < java.lang.reflect.Array.getLength(array); i++) {
                    java.lang.reflect.Array.set(array, i, drawn(type.getComponentType(), near, random));
                }
                return array;
            }
            int n;
            if (!near.isEmpty() && random.nextBoolean()) {
                n = near.get(random.nextInt(near.size())).intValue() + random.nextInt(-2, 3);
            } else {
                n = random.nextInt(4) > 0 ? random.nextInt(-10, 13) : random.nextInt(-9, 100);
            }
            if (type == int.class || type == Integer.class) {
                return n;
            } else if (type == long.class || type == Long.class) {
                return (long) n;
            } else if (type == short.class || type == Short.class) {
                return (short) n;
            } else if (type == byte.class || type == Byte.class) {
                return (byte) n;
            } else if (type == double.class || type == Double.class) {
                return n + random.nextInt(0, 4) / 4.0;
            } else if (type == float.class || type == Float.class) {
                return (float) (n + random.nextInt(0, 4) / 4.0);
            } else if (type == boolean.class || type == Boolean.class) {
                return random.nextBoolean();
            } else if (type == char.class || type == Character.class) {
                return (char) ('a' + random.nextInt(26));
            } else if (type == String.class) {
                return nearMiss("", random) + nearMiss("", random).repeat(random.nextInt(0, 4));
            } else if (type == java.math.BigInteger.class) {
                return java.math.BigInteger.valueOf(n);
            } else if (type == java.math.BigDecimal.class) {
                return java.math.BigDecimal.valueOf(n);
            } else if (type.isEnum()) {
                Object[] constants = type.getEnumConstants();
                return constants[random.nextInt(constants.length)];
            }
            return null; // a Number of another kind: the constructor may refuse it
        }
    }

    /** A value's state as text, field by field (a class's own {@code toString} could hide it): numbers,
     * strings and other JDK values by their text, arrays and collections element by element, the
     * solution's values by their fields, a few levels deep. */
    static final class Fingerprint {
        static final int LONGEST = 1 << 14; // past this, a value's parts are told apart by identity

        static String of(Object value) {
            StringBuilder text = new StringBuilder();
            write(value, text, 0);
            return text.toString();
        }

        static void write(Object value, StringBuilder text, int depth) {
            if (value == null) {
                text.append("null");
                return;
            }
            Class<?> type = value.getClass();
            text.append(type.getName()).append('(');
            if (depth > 4 || text.length() > LONGEST) {
                text.append(System.identityHashCode(value));
            } else if (type.isArray()) {
                for (int i = 0; i < java.lang.reflect.Array.getLength(value); i++) {
                    write(java.lang.reflect.Array.get(value, i), text, depth + 1);
                    text.append(',');
                }
            } else if (value instanceof java.util.Collection<?> items) {
                for (Object item : items) {
                    write(item, text, depth + 1);
                    text.append(',');
                }
            } else if (value instanceof java.util.Map<?, ?> map) {
                for (java.util.Map.Entry<?, ?> entry : map.entrySet()) {
                    write(entry.getKey(), text, depth + 1);
                    text.append('=');
                    write(entry.getValue(), text, depth + 1);
                    text.append(',');
                }
            } else if (type.getName().startsWith("java.") || type.isEnum()) {
                text.append(value);
            } else {
                fields(value, text, depth);
            }
            text.append(')');
        }

        /** The numbers in {@code value}'s own fields, and in arrays and collections it holds. */
        static void numbers(Object value, List<Number> into) {
            if (value == null || value.getClass().getName().startsWith("java.")) {
                return;
            }
            for (java.lang.reflect.Field field : instanceFields(value.getClass())) {
                try {
                    field.setAccessible(true);
                    Object held = field.get(value);
                    if (held instanceof Number number) {
                        into.add(number);
                    } else if (held instanceof java.util.Collection<?> items) {
                        items.stream().filter(Number.class::isInstance).limit(16).forEach(x -> into.add((Number) x));
                    } else if (held != null && held.getClass().isArray()
                            && held.getClass().getComponentType().isPrimitive()) {
                        for (int i = 0; i < Math.min(16, java.lang.reflect.Array.getLength(held)); i++) {
                            if (java.lang.reflect.Array.get(held, i) instanceof Number number) {
                                into.add(number);
                            }
                        }
                    }
                } catch (RuntimeException | IllegalAccessException exc) {
                    // left out
                }
            }
        }

        static void fields(Object value, StringBuilder text, int depth) {
            for (java.lang.reflect.Field field : instanceFields(value.getClass())) {
                try {
                    field.setAccessible(true);
                    text.append(field.getName()).append('=');
                    write(field.get(value), text, depth + 1);
                    text.append(';');
                } catch (ReflectiveOperationException | RuntimeException exc) {
                    text.append('?');
                }
            }
        }
    }

    static Object unlike(Class<?> type, Object value, ThreadLocalRandom random) {
        long offset = random.nextInt(1, 1000);
        if (type == boolean.class) {
            return !(Boolean) value;
        } else if (type == int.class) {
            return (int) ((Integer) value + offset);
        } else if (type == long.class) {
            return (Long) value + offset;
        } else if (type == short.class) {
            return (short) ((Short) value + offset);
        } else if (type == byte.class) {
            return (byte) ((Byte) value + 1 + random.nextInt(100));
        } else if (type == char.class) {
            return (char) ((Character) value + 1 + random.nextInt(25));
        } else if (type == double.class) {
            double number = (Double) value;
            return number + offset != number ? number + offset : number * 2 + 1;
        } else if (type == float.class) {
            float number = (Float) value;
            return number + offset != number ? number + offset : number * 2 + 1;
        } else if (type == String.class) {
            return nearMiss(value == null ? "" : (String) value, random);
        }
        return null;
    }
}
