/*
 * test_json.c -- the lmc_json tree, the Python-compatible emitter and the
 * jansson-based parser.
 *
 * Expected strings were produced with CPython 3 (json.dumps, repr(float)).
 * The out-of-memory sweep replaces malloc/calloc/realloc in this executable
 * (glibc allows that), so it only runs in builds without a sanitizer, whose
 * runtime owns those symbols.
 */
/* cmocka.h needs these first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/json.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HAVE_ALLOC_HOOK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define HAVE_ALLOC_HOOK 0
#endif
#endif
#ifndef HAVE_ALLOC_HOOK
#define HAVE_ALLOC_HOOK 1
#endif

/* ---- helpers ------------------------------------------------------------ */

static char *float_repr(double d)
{
    static char buf[64];
    lmc_json_format_float(d, buf, sizeof(buf));
    return buf;
}

/* Dump v with the given flags/indent, compare to expected, free both. */
static void assert_dumps(lmc_json *v, unsigned flags, int indent, const char *expected)
{
    assert_non_null(v);
    size_t len = 0;
    char *s = lmc_json_dumps(v, flags, indent, &len);
    assert_non_null(s);
    assert_string_equal(s, expected);
    assert_int_equal(len, strlen(expected));
    free(s);
    lmc_json_free(v);
}

/* {"b":[1,2],"a":{"y":0.8,"x":true,"z":null}}, built in that order. */
static lmc_json *build_trace_example(void)
{
    lmc_json *root = lmc_json_object();
    lmc_json *b = lmc_json_array();
    lmc_json *a = lmc_json_object();
    lmc_status st = LMC_OK;
    st |= lmc_json_array_append(b, lmc_json_int(1));
    st |= lmc_json_array_append(b, lmc_json_int(2));
    st |= lmc_json_object_set(root, "b", b);
    st |= lmc_json_object_set(a, "y", lmc_json_float(0.8));
    st |= lmc_json_object_set(a, "x", lmc_json_bool(true));
    st |= lmc_json_object_set(a, "z", lmc_json_null());
    st |= lmc_json_object_set(root, "a", a);
    if (st != LMC_OK) {
        lmc_json_free(root);
        return NULL;
    }
    return root;
}

/*
 * {"name": "café 😀", "list": [1, -2.5, [], {}, {"k": null}],
 *  "cfg": {"zeta": 1e-05, "alpha": [true, false], "mid": {}}, "n": NaN}
 */
static lmc_json *build_nested_example(void)
{
    lmc_json *root = lmc_json_object();
    lmc_json *list = lmc_json_array();
    lmc_json *k = lmc_json_object();
    lmc_json *cfg = lmc_json_object();
    lmc_json *alpha = lmc_json_array();
    lmc_status st = LMC_OK;
    st |= lmc_json_object_set(root, "name", lmc_json_string("caf\xc3\xa9 \xf0\x9f\x98\x80"));
    st |= lmc_json_array_append(list, lmc_json_int(1));
    st |= lmc_json_array_append(list, lmc_json_float(-2.5));
    st |= lmc_json_array_append(list, lmc_json_array());
    st |= lmc_json_array_append(list, lmc_json_object());
    st |= lmc_json_object_set(k, "k", lmc_json_null());
    st |= lmc_json_array_append(list, k);
    st |= lmc_json_object_set(root, "list", list);
    st |= lmc_json_object_set(cfg, "zeta", lmc_json_float(1e-05));
    st |= lmc_json_array_append(alpha, lmc_json_bool(true));
    st |= lmc_json_array_append(alpha, lmc_json_bool(false));
    st |= lmc_json_object_set(cfg, "alpha", alpha);
    st |= lmc_json_object_set(cfg, "mid", lmc_json_object());
    st |= lmc_json_object_set(root, "cfg", cfg);
    st |= lmc_json_object_set(root, "n", lmc_json_float(NAN));
    if (st != LMC_OK) {
        lmc_json_free(root);
        return NULL;
    }
    return root;
}

static lmc_json *parse_ok(const char *text)
{
    lmc_json *v = NULL;
    lmc_error err;
    lmc_error_clear(&err);
    lmc_status st = lmc_json_parse(text, strlen(text), &v, &err);
    if (st != LMC_OK)
        fail_msg("parse of '%s' failed: %s", text, err.msg);
    return v;
}

/* ---- float.__repr__ ------------------------------------------------------ */

static void test_float_repr_picks_shortest_round_trip_digits(void **state)
{
    (void)state;
    assert_string_equal(float_repr(0.8), "0.8");
    assert_string_equal(float_repr(0.1), "0.1");
    assert_string_equal(float_repr(0.1 + 0.2), "0.30000000000000004");
    assert_string_equal(float_repr(123456789.123), "123456789.123");
}

static void test_float_repr_integral_value_ends_in_point_zero(void **state)
{
    (void)state;
    assert_string_equal(float_repr(100.0), "100.0");
    assert_string_equal(float_repr(0.0), "0.0");
    assert_string_equal(float_repr(-3.0), "-3.0");
}

static void test_float_repr_uses_exponent_below_1e_minus_4(void **state)
{
    (void)state;
    assert_string_equal(float_repr(1e-05), "1e-05");
    assert_string_equal(float_repr(2.5e-7), "2.5e-07");
    assert_string_equal(float_repr(9.99e-5), "9.99e-05");
}

static void test_float_repr_keeps_fixed_notation_down_to_1e_minus_4(void **state)
{
    (void)state;
    assert_string_equal(float_repr(0.0001), "0.0001");
    assert_string_equal(float_repr(0.000123), "0.000123");
}

static void test_float_repr_uses_exponent_from_1e16(void **state)
{
    (void)state;
    assert_string_equal(float_repr(1e16), "1e+16");
    assert_string_equal(float_repr(1.5e300), "1.5e+300");
    assert_string_equal(float_repr(12345678901234567890.0), "1.2345678901234567e+19");
}

static void test_float_repr_keeps_fixed_notation_below_1e16(void **state)
{
    (void)state;
    assert_string_equal(float_repr(1e15), "1000000000000000.0");
    assert_string_equal(float_repr(1234567890123456.0), "1234567890123456.0");
    assert_string_equal(float_repr(9999999999999998.0), "9999999999999998.0");
}

static void test_float_repr_keeps_sign_of_negative_zero(void **state)
{
    (void)state;
    assert_string_equal(float_repr(-0.0), "-0.0");
}

static void test_float_repr_handles_largest_and_smallest_doubles(void **state)
{
    (void)state;
    assert_string_equal(float_repr(1.7976931348623157e+308), "1.7976931348623157e+308");
    assert_string_equal(float_repr(5e-324), "5e-324");
    assert_string_equal(float_repr(2.2250738585072014e-308), "2.2250738585072014e-308");
}

static void test_float_repr_spells_nan_and_infinities_like_json_module(void **state)
{
    (void)state;
    assert_string_equal(float_repr(NAN), "NaN");
    assert_string_equal(float_repr(-NAN), "NaN");
    assert_string_equal(float_repr(INFINITY), "Infinity");
    assert_string_equal(float_repr(-INFINITY), "-Infinity");
}

/*
 * At a power of two the gap below is half the gap above, and the shortest
 * string that reads back is not always the correctly rounded one: 2**-1017
 * has 16 digits in Python, while %.15e's rounding does not read back.
 */
static void test_float_repr_power_of_two_takes_shorter_neighbour(void **state)
{
    (void)state;
    assert_string_equal(float_repr(0x1p-1017), "7.120236347223045e-307");
}

static const struct {
    double d;
    const char *repr;
} python_reprs[] = {
    /* generated with CPython: random bit patterns, powers of two, decades */
    {0x1.0000000000000p-1017, "7.120236347223045e-307"},
    {0x1.0000000000000p-1007, "7.291122019556398e-304"},
    {0x1.0000000000000p-957, "8.209073602596753e-289"},
    {0x1.0000000000000p-921, "5.641232424577593e-278"},
    {0x1.0000000000000p-808, "5.858190679279809e-244"},
    {0x1.0000000000000p-791, "7.678447687145631e-239"},
    {0x1.0000000000000p-788, "6.142758149716505e-238"},
    {0x1.0000000000000p-778, "6.290184345309701e-235"},
    {0x1.0000000000000p-705, "5.940911144672375e-213"},
    {0x1.0000000000000p-695, "6.083493012144512e-210"},
    {0x1.0000000000000p-662, "5.225680706521042e-200"},
    {0x1.0000000000000p-652, "5.351097043477547e-197"},
    {0x0.0000000000001p-1022, "5e-324"},
    {0x0.8000000000000p-1022, "1.1125369292536007e-308"},
    {0x1.0000000000000p-1022, "2.2250738585072014e-308"},
    {0x1.0000000000000p-1, "0.5"},
    {0x1.0000000000000p+0, "1.0"},
    {0x1.0000000000000p+1, "2.0"},
    {0x1.0000000000000p+52, "4503599627370496.0"},
    {0x1.0000000000000p+53, "9007199254740992.0"},
    {0x1.0000000000000p+54, "1.8014398509481984e+16"},
    {0x1.0000000000000p+63, "9.223372036854776e+18"},
    {0x1.0000000000000p+64, "1.8446744073709552e+19"},
    {0x1.0000000000000p+1023, "8.98846567431158e+307"},
    {0x0.fffffffffffffp-1022, "2.225073858507201e-308"},
    {0x1.0000000000001p+0, "1.0000000000000002"},
    {0x1.fffffffffffffp-1, "0.9999999999999999"},
    {0x1.ad7f29abcaf48p-24, "1e-07"},
    {0x1.0c6f7a0b5ed8dp-20, "1e-06"},
    {0x1.4f8b588e368f1p-17, "1e-05"},
    {0x1.a36e2eb1c432dp-14, "0.0001"},
    {0x1.0624dd2f1a9fcp-10, "0.001"},
    {0x1.999999999999ap-4, "0.1"},
    {0x1.4000000000000p+3, "10.0"},
    {0x1.c6bf526340000p+49, "1000000000000000.0"},
    {0x1.1c37937e08000p+53, "1e+16"},
    {0x1.6345785d8a000p+56, "1e+17"},
    {0x1.0f0cf064dd592p+73, "1e+22"},
    {0x1.52d02c7e14af6p+76, "1e+23"},
    {0x1.249ad2594c37dp+332, "1e+100"},
    {0x1.bff2ee48e0530p-333, "1e-100"},
    {0x1.1ccf385ebc8a0p+1023, "1e+308"},
    {0x0.730d67819e8d2p-1022, "1e-308"},
    {0x0.0000000000002p-1022, "1e-323"},
    {0x1.1c37937e07fffp+53, "9999999999999998.0"},
    {0x1.18b54f22aeb03p+50, "1234567890123456.8"},
    {0x1.3333333333334p-2, "0.30000000000000004"},
    {0x1.5555555555555p-2, "0.3333333333333333"},
    {0x1.5555555555555p-1, "0.6666666666666666"},
    {0x1.921fb54442d18p+1, "3.141592653589793"},
    {0x1.5bf0a8b145769p+1, "2.718281828459045"},
    {0x1.56a95319d63e1p+63, "1.2345678901234567e+19"},
    {0x1.01f31f46ed246p-13, "0.000123"},
    {0x1.9e0fcaf9380fcp-17, "1.234e-05"},
    {0x1.1eb2d66005835p+997, "1.5e+300"},
    {-0x1.01297d23ab683p-996, "-1.5e-300"},
    {0x1.1666666666666p+2, "4.35"},
    {0x1.5666666666666p+1, "2.675"},
    {0x1.c7e83209e90b2p+72, "8.41e+21"},
    {0x1.882321e35049ep+842, "4.492152248019643e+253"},
    {0x1.8c2926b94b5b5p+925, "4.389120112770094e+278"},
    {0x1.2aadbc8f429a4p+37, "160351883752.32532"},
    {-0x1.a79959588532dp+696, "-5.4399131119142674e+209"},
    {0x1.3bd58da60fb1cp-48, "4.383079907872608e-15"},
    {0x1.c61236c88c537p+278, "8.614354442467737e+83"},
    {-0x1.1b64633be40f5p+844, "-1.2985664392816573e+254"},
    {-0x1.18c966f3d88f7p-888, "-5.314965623006408e-268"},
    {-0x1.b195060c40eb7p+418, "-1.146488202889241e+126"},
    {0x1.8acc213a5bf07p+433, "3.420758551378043e+130"},
    {0x1.d670af9a3638ep+678, "2.3046315439163635e+204"},
    {0x1.94db7e48f12b9p+169, "1.1833994934170815e+51"},
    {-0x1.e22cad37b17c6p+428, "-1.3055768296735293e+129"},
    {-0x1.9bfbc91ba7257p-980, "-1.5748679552677205e-295"},
    {0x1.197f45625871bp-816, "2.51627196477289e-246"},
    {-0x1.40b6020d0b29cp-429, "-9.036613517376497e-130"},
    {-0x1.3165de1ab3e01p-181, "-3.892215651960722e-55"},
    {0x1.cb70f964e03c0p+1, "3.589385198837107"},
    {-0x1.3acdf2060d7c4p+617, "-6.688184663054428e+185"},
    {-0x1.8e92df2adcc0ep-962, "-3.994044171376333e-290"},
    {0x1.d9a4de6cf02bbp+244, "5.2303534038858595e+73"},
    {-0x1.9ee169646a718p-252, "-2.239361282907897e-76"},
    {0x1.ab03d8de49eb1p-714, "1.9354693131874806e-215"},
    {-0x1.5b021e0d44f2bp+521, "-9.305240496802682e+156"},
    {-0x1.86bd5a7550d23p-405, "-1.8471377613108987e-122"},
    {0x1.474c15e9ecba7p+41, "2811461620697.4565"},
    {0x1.6bd800bc49874p+670, "6.962609881020059e+201"},
    {-0x1.2de50ff542939p-693, "-2.8696480509335243e-209"},
    {-0x1.25c12903c3ad2p+460, "-3.41619470970423e+138"},
    {0x1.ae4d4359e9d02p+869, "6.616060051749092e+261"},
    {-0x1.ba1690ce64264p-678, "-1.3769933585597693e-204"},
    {0x1.dda8fd41f125bp+928, "4.2336503662127315e+279"},
    {0x1.ac63a43514e2ep+230, "2.887337660350333e+69"},
    {0x1.dd41a347a2e47p-664, "2.4355366694702615e-200"},
    {0x1.63c49440a9a11p-461, "2.3339888564043163e-139"},
    {-0x1.354ef398bdedfp-463, "-5.072987159160624e-140"},
    {-0x1.01733d942b204p-624, "-1.444561059875671e-188"},
    {0x1.8765c57810ce8p+637, "8.719375264419009e+191"},
    {0x1.2d1aff1067dbdp-800, "1.7639331668509974e-241"},
    {-0x1.f115c6a44f3ccp-456, "-1.0435487072953564e-137"},
    {0x1.ce6e5f89c8d33p+168, "6.75843876005182e+50"},
    {-0x1.fa1f725601b2fp-477, "-5.066499894016898e-144"},
    {0x1.9320448410fe3p-588, "1.5544023441874205e-177"},
    {0x1.3796d40618823p+261, "4.509945161717723e+78"},
    {-0x1.718296e887807p+89, "-8.934206376953689e+26"},
    {0x1.8d6a904943815p-758, "1.0239269122939286e-228"},
    {0x1.8b767352e4941p-92, "3.119650612955522e-28"},
    {-0x1.9cdec60c9e347p-590, "-3.979936478258974e-178"},
    {0x1.b86486a2a1812p+897, "1.8176331567502735e+270"},
    {-0x1.5b28fafb5454bp-876, "-2.6916191680102057e-264"},
    {-0x1.d8e8e32474e22p+761, "-2.2406033019642223e+229"},
    {0x1.de531518bd8abp-643, "5.1191220706885394e-194"},
    {0x1.3ce50dcfe4bccp+724, "1.0924257505679557e+218"},
    {-0x1.2ffe4ed2261f1p+253, "-1.718751453462524e+76"},
    {-0x1.0b9583a589e65p-865, "-4.24887536492955e-261"},
    {0x1.279a1abe7020ep-15, "3.523850090259374e-05"},
    {0x1.6d2e1c91d6da3p+112, "7.406732842697646e+33"},
    {-0x1.c2788a8e1f980p+17, "-230641.08246226236"},
    {-0x1.d4d25c8ec9febp-538, "-2.0353077945140491e-162"},
    {-0x1.3d5b062c4a228p+369, "-1.4906461069017133e+111"},
    {-0x1.33d7f9e6d7500p+17, "-157615.95235721022"},
    {0x1.39ae84f2446fcp+19, "642420.1545736487"},
    {0x1.44c6eb173be88p+19, "665143.3465861836"},
    {-0x1.3c5f1ee7fb29ap+19, "-647928.9658180058"},
    {-0x1.a862244362742p+19, "-869137.1332256573"},
    {0x1.867d0ee7f2148p+18, "399860.2329068375"},
    {0x1.a8ddfff80a6a0p+19, "870127.9990284033"},
    {0x1.4a78e66b73c42p+19, "676807.200616725"},
    {-0x1.5427e1778d0e4p+17, "-174159.76146090694"},
    {0x1.bc43858898194p+19, "909852.1729240888"},
    {-0x1.321973d8191c4p+18, "-313445.8100645805"},
    {-0x1.19c680019ddf4p+19, "-577076.0001973496"},
    {-0x1.b85a839c220ecp+17, "-225461.02820230217"},
    {-0x1.e136365abaf62p+18, "-492760.84928773914"},
    {0x1.5becdd48af56cp+18, "356275.4575613353"},
    {-0x1.bda5f7c917e9cp+17, "-228171.93582438387"},
    {0x1.857b3ba968d90p+16, "99707.23305373476"},
    {0x1.454bf4d1a5e96p+19, "666207.6505918081"},
    {0x1.219d5f73a095cp+19, "593130.9828646588"},
    {0x1.e77bbcbf10738p+17, "249591.47458081855"},
    {-0x1.3d0f18bb85a20p+14, "-20291.774152839673"},
    {-0x1.0dfd0c9305f12p+18, "-276468.1964735846"},
    {0x1.c70c57c9f1510p+16, "116492.34292515018"},
    {0x1.7bb859cc71f32p+19, "777666.8062066792"},
    {-0x1.26f1fc98d7141p+19, "-604047.8936572449"},
    {0x1.5a36038f9a8bep+19, "709040.1112797481"},
    {-0x1.be9c1e9eb6edcp+18, "-457328.4784371683"},
    {-0x1.c7fa319b82990p+16, "-116730.19377914653"},
    {-0x1.10f1e797b05a0p+16, "-69873.90465833852"},
    {-0x1.7c4f1c93fbc14p+19, "-778872.893064382"},
    {0x1.32f64fa28d850p+19, "628658.4885928724"},
    {0x1.d29f11c5f8d00p+18, "477820.2777082473"},
    {-0x1.b13935a7f46e8p+18, "-443620.83837614814"},
    {-0x1.667e8ab3656b5p+19, "-734196.3343989464"},
    {-0x1.8ec0e66a8e34cp+19, "-816647.2005072623"},
    {0x1.52fa47da79740p+13, "10847.285084675648"},
    {-0x1.623f936346610p+16, "-90687.57573356503"},
    {0x1.bad532ae6cba0p+16, "113365.1979740099"},
    {0x1.d0d1a17b24feep+19, "951949.0462822893"},
    {-0x1.1cd1c71be9bd4p+19, "-583310.222157354"},
    {0x1.90a9948000000p+32, "6722000000.0"},
    {0x1.e89bec6000000p+35, "65580000000.0"},
    {0x1.85fdc7ae00000p+43, "13400000000000.0"},
    {0x1.6b373ef000000p+38, "390000000000.0"},
    {0x1.d6f33b8000000p+28, "493827000.0"},
    {0x1.24cabb88a9400p+54, "2.06034e+16"},
    {0x1.90d0000000000p+12, "6413.0"},
    {0x1.3c5e5cf6221c0p+56, "8.9049846e+16"},
    {0x1.19e1b89647643p+72, "5.1998e+21"},
    {0x1.1666666666667p+3, "8.700000000000001"},
    {0x1.3d45ce4e82000p+49, "697690000000000.0"},
    {0x1.eeff34d6a161ep+9, "989.9938"},
    {0x1.1b821a29aa7c0p-11, "0.0005407490000000001"},
    {0x1.993399893ac00p+55, "5.759e+16"},
    {0x1.0ae90ed6f1818p+63, "9.61646e+18"},
    {0x1.9d469046da661p-9, "0.0031530429000000003"},
    {0x1.ec29701a8a740p+61, "4.433e+18"},
    {0x1.10d9316ec0000p+53, "9600000000000000.0"},
    {0x1.cac083126e979p-5, "0.056"},
    {0x1.645a1cac08313p-4, "0.08700000000000001"},
    {0x1.6b078fe7fffffp+38, "389799999999.99994"},
    {0x1.04aa70cc51cb7p+73, "9.61687e+21"},
    {0x1.d4c0000000000p+14, "30000.0"},
    {0x1.2660000000000p+13, "9420.0"},
    {0x1.70be5622b298ap-4, "0.09002526899999999"},
    {0x1.11a190ef0d550p+61, "2.46465e+18"},
    {0x1.30a92adff6bf5p+72, "5.62e+21"},
    {0x1.c9832081fffffp+41, "3929999999999.9995"},
    {0x1.4557800000000p+19, "666300.0"},
    {0x1.cdef9d8000000p+35, "62000000000.0"},
};

static void test_float_repr_matches_python_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(python_reprs) / sizeof(python_reprs[0]); i++) {
        const char *got = float_repr(python_reprs[i].d);
        if (strcmp(got, python_reprs[i].repr) != 0)
            fail_msg("entry %zu (%a): got '%s', Python says '%s'", i, python_reprs[i].d, got,
                     python_reprs[i].repr);
    }
}

static void test_float_repr_truncates_into_small_buffer_and_returns_full_length(void **state)
{
    (void)state;
    char buf[5];
    assert_int_equal(lmc_json_format_float(0.30000000000000004, buf, sizeof(buf)), 19);
    assert_string_equal(buf, "0.30");
    assert_int_equal(lmc_json_format_float(-1.7976931348623157e+308, NULL, 0), 24);
}

/* ---- dumps ---------------------------------------------------------------- */

static void test_dumps_trace_example_sorts_keys_recursively(void **state)
{
    (void)state;
    assert_dumps(build_trace_example(), LMC_JSON_SORT_KEYS, -1,
                 "{\"a\": {\"x\": true, \"y\": 0.8, \"z\": null}, \"b\": [1, 2]}");
}

static void test_dumps_trace_example_has_lmcache_sha256(void **state)
{
    (void)state;
    lmc_json *v = build_trace_example();
    assert_non_null(v);
    size_t len;
    char *s = lmc_json_dumps(v, LMC_JSON_SORT_KEYS, -1, &len);
    assert_non_null(s);
    char hex[LMC_SHA256_HEX_LEN + 1];
    lmc_sha256_hex(s, len, hex);
    assert_string_equal(hex, "6a30740c790aa15ca3d7e6c8e600db680a50eacf6c74007374bc9dacb87a8474");
    free(s);
    lmc_json_free(v);
}

static void test_dumps_without_sort_keeps_insertion_order(void **state)
{
    (void)state;
    assert_dumps(build_trace_example(), 0, -1,
                 "{\"b\": [1, 2], \"a\": {\"y\": 0.8, \"x\": true, \"z\": null}}");
}

static void test_dumps_indent_2_matches_python(void **state)
{
    (void)state;
    /* json.dumps(obj, indent=2, sort_keys=True) */
    assert_dumps(build_nested_example(), LMC_JSON_SORT_KEYS, 2,
                 "{\n  \"cfg\": {\n    \"alpha\": [\n      true,\n      false\n    ],\n"
                 "    \"mid\": {},\n    \"zeta\": 1e-05\n  },\n  \"list\": [\n    1,\n"
                 "    -2.5,\n    [],\n    {},\n    {\n      \"k\": null\n    }\n  ],\n"
                 "  \"n\": NaN,\n  \"name\": \"caf\\u00e9 \\ud83d\\ude00\"\n}");
}

static void test_dumps_compact_nested_matches_python(void **state)
{
    (void)state;
    assert_dumps(build_nested_example(), LMC_JSON_SORT_KEYS, -1,
                 "{\"cfg\": {\"alpha\": [true, false], \"mid\": {}, \"zeta\": 1e-05}, "
                 "\"list\": [1, -2.5, [], {}, {\"k\": null}], \"n\": NaN, "
                 "\"name\": \"caf\\u00e9 \\ud83d\\ude00\"}");
}

static void test_dumps_indent_0_breaks_lines_without_spaces(void **state)
{
    (void)state;
    /* json.dumps(obj, indent=0) */
    assert_dumps(build_nested_example(), 0, 0,
                 "{\n\"name\": \"caf\\u00e9 \\ud83d\\ude00\",\n\"list\": [\n1,\n-2.5,\n[],\n{},\n"
                 "{\n\"k\": null\n}\n],\n\"cfg\": {\n\"zeta\": 1e-05,\n\"alpha\": [\ntrue,\n"
                 "false\n],\n\"mid\": {}\n},\n\"n\": NaN\n}");
}

static void test_dumps_empty_containers_stay_compact_with_indent(void **state)
{
    (void)state;
    assert_dumps(lmc_json_object(), LMC_JSON_SORT_KEYS, 2, "{}");
    assert_dumps(lmc_json_array(), 0, 4, "[]");
}

static void test_dumps_scalars(void **state)
{
    (void)state;
    assert_dumps(lmc_json_null(), 0, -1, "null");
    assert_dumps(lmc_json_bool(true), 0, -1, "true");
    assert_dumps(lmc_json_bool(false), 0, -1, "false");
    assert_dumps(lmc_json_int(INT64_MIN), 0, -1, "-9223372036854775808");
    assert_dumps(lmc_json_int(INT64_MAX), 0, 2, "9223372036854775807");
    assert_dumps(lmc_json_float(-INFINITY), 0, -1, "-Infinity");
}

static void test_dumps_escapes_quotes_backslashes_and_control_characters(void **state)
{
    (void)state;
    /* json.dumps("\x00\x01\x1f\x7f\"\\/\n\r\t\b\f\u20ac") */
    static const char text[] = "\x00\x01\x1f\x7f\"\\/\n\r\t\b\f\xe2\x82\xac";
    assert_dumps(lmc_json_stringn(text, sizeof(text) - 1), 0, -1,
                 "\"\\u0000\\u0001\\u001f\\u007f\\\"\\\\/\\n\\r\\t\\b\\f\\u20ac\"");
}

static void test_dumps_escapes_non_ascii_with_lowercase_hex(void **state)
{
    (void)state;
    assert_dumps(lmc_json_string("\xc3\xa9\xc3\xbf\xef\xbf\xbf"), 0, -1,
                 "\"\\u00e9\\u00ff\\uffff\"");
}

static void test_dumps_escapes_non_bmp_as_surrogate_pair(void **state)
{
    (void)state;
    assert_dumps(lmc_json_string("\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"), 0, -1,
                 "\"\\ud83d\\ude00\\udbff\\udfff\"");
}

static void test_dumps_escapes_each_invalid_utf8_byte_as_u00xx(void **state)
{
    (void)state;
    /* stray continuation, overlong NUL, encoded surrogate, truncated sequence, 0xff */
    assert_dumps(lmc_json_stringn("a\x80"
                                  "b\xc0\x80"
                                  "c\xed\xa0\x80"
                                  "d\xe2\x82"
                                  "e\xff",
                                  14),
                 0, -1, "\"a\\u0080b\\u00c0\\u0080c\\u00ed\\u00a0\\u0080d\\u00e2\\u0082e\\u00ff\"");
}

static void test_dumps_sort_keys_uses_code_point_order(void **state)
{
    (void)state;
    lmc_json *o = lmc_json_object();
    lmc_status st = LMC_OK;
    st |= lmc_json_object_set(o, "\xc3\xa9", lmc_json_int(1));
    st |= lmc_json_object_set(o, "z", lmc_json_int(2));
    st |= lmc_json_object_set(o, "\xf0\x9f\x98\x80", lmc_json_int(3));
    st |= lmc_json_object_set(o, "\xef\xbf\xbf", lmc_json_int(4));
    st |= lmc_json_object_set(o, "Z", lmc_json_int(5));
    st |= lmc_json_object_set(o, "", lmc_json_int(6));
    st |= lmc_json_object_set(o, "ab", lmc_json_int(8));
    st |= lmc_json_object_set(o, "a", lmc_json_int(7));
    assert_int_equal(st, LMC_OK);
    assert_dumps(o, LMC_JSON_SORT_KEYS, -1,
                 "{\"\": 6, \"Z\": 5, \"a\": 7, \"ab\": 8, \"z\": 2, \"\\u00e9\": 1, "
                 "\"\\uffff\": 4, \"\\ud83d\\ude00\": 3}");
}

static void test_dumps_of_null_value_returns_null(void **state)
{
    (void)state;
    size_t len = 99;
    assert_null(lmc_json_dumps(NULL, 0, -1, &len));
    assert_int_equal(len, 0);
}

/* ---- building and reading the tree ---------------------------------------- */

static void test_object_set_replaces_existing_key_in_place(void **state)
{
    (void)state;
    lmc_json *v = build_trace_example();
    assert_non_null(v);
    assert_int_equal(lmc_json_object_set(v, "b", lmc_json_string("new")), LMC_OK);
    assert_int_equal(lmc_json_size(v), 2);
    assert_string_equal(lmc_json_object_key_at(v, 0), "b");
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(v, "b"), NULL), "new");
    assert_dumps(v, 0, -1, "{\"b\": \"new\", \"a\": {\"y\": 0.8, \"x\": true, \"z\": null}}");
}

static void test_object_get_returns_null_for_missing_key(void **state)
{
    (void)state;
    lmc_json *v = build_trace_example();
    assert_non_null(v);
    assert_null(lmc_json_object_get(v, "c"));
    assert_null(lmc_json_object_get(v, "bb"));
    assert_null(lmc_json_object_key_at(v, 2));
    assert_null(lmc_json_object_value_at(v, 2));
    lmc_json_free(v);
}

static void test_setters_report_nomem_for_null_child(void **state)
{
    (void)state;
    lmc_json *o = lmc_json_object();
    lmc_json *a = lmc_json_array();
    assert_int_equal(lmc_json_object_set(o, "k", NULL), LMC_ERR_NOMEM);
    assert_int_equal(lmc_json_array_append(a, NULL), LMC_ERR_NOMEM);
    assert_int_equal(lmc_json_size(o), 0);
    assert_int_equal(lmc_json_size(a), 0);
    lmc_json_free(o);
    lmc_json_free(a);
}

/* The child is freed (ASan would report a leak otherwise). */
static void test_setters_on_wrong_container_take_child_and_report_invalid(void **state)
{
    (void)state;
    lmc_json *o = lmc_json_object();
    lmc_json *a = lmc_json_array();
    assert_int_equal(lmc_json_array_append(o, lmc_json_string("x")), LMC_ERR_INVALID);
    assert_int_equal(lmc_json_object_set(a, "k", lmc_json_int(1)), LMC_ERR_INVALID);
    assert_int_equal(lmc_json_object_set(NULL, "k", lmc_json_int(1)), LMC_ERR_INVALID);
    assert_int_equal(lmc_json_object_set(o, NULL, lmc_json_int(1)), LMC_ERR_INVALID);
    assert_int_equal(lmc_json_array_append(NULL, lmc_json_null()), LMC_ERR_INVALID);
    lmc_json_free(o);
    lmc_json_free(a);
}

/* Inserting a container into itself would make a cycle; it is refused and not freed. */
static void test_setters_refuse_container_as_its_own_child(void **state)
{
    (void)state;
    lmc_json *o = lmc_json_object();
    lmc_json *a = lmc_json_array();
    assert_int_equal(lmc_json_object_set(o, "self", o), LMC_ERR_INVALID);
    assert_int_equal(lmc_json_array_append(a, a), LMC_ERR_INVALID);
    assert_int_equal(lmc_json_size(o), 0);
    assert_int_equal(lmc_json_size(a), 0);
    lmc_json_free(o);
    lmc_json_free(a);
}

static void test_accessors_return_defaults_for_other_types(void **state)
{
    (void)state;
    lmc_json *s = lmc_json_string("5");
    assert_non_null(s);
    size_t len = 7;
    assert_false(lmc_json_get_bool(s));
    assert_int_equal(lmc_json_get_int(s), 0);
    assert_true(lmc_json_get_number(s) == 0.0);
    assert_int_equal(lmc_json_size(s), 0);
    assert_null(lmc_json_array_at(s, 0));
    assert_null(lmc_json_object_get(s, "x"));
    lmc_json_free(s);
    lmc_json *i = lmc_json_int(5);
    assert_null(lmc_json_get_string(i, &len));
    assert_int_equal(len, 0);
    assert_true(lmc_json_get_number(i) == 5.0);
    lmc_json_free(i);
}

static void test_stringn_keeps_embedded_nul(void **state)
{
    (void)state;
    lmc_json *s = lmc_json_stringn("a\0b", 3);
    assert_non_null(s);
    size_t len = 0;
    const char *p = lmc_json_get_string(s, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(p, "a\0b", 4);
    assert_dumps(s, 0, -1, "\"a\\u0000b\"");
}

static void test_type_names_match_header(void **state)
{
    (void)state;
    assert_string_equal(lmc_json_type_name(LMC_JSON_NULL), "null");
    assert_string_equal(lmc_json_type_name(LMC_JSON_BOOL), "bool");
    assert_string_equal(lmc_json_type_name(LMC_JSON_INT), "int");
    assert_string_equal(lmc_json_type_name(LMC_JSON_FLOAT), "float");
    assert_string_equal(lmc_json_type_name(LMC_JSON_STRING), "string");
    assert_string_equal(lmc_json_type_name(LMC_JSON_ARRAY), "array");
    assert_string_equal(lmc_json_type_name(LMC_JSON_OBJECT), "object");
}

/* ---- parse ---------------------------------------------------------------- */

static void test_parse_maps_integers_to_int_and_reals_to_float(void **state)
{
    (void)state;
    lmc_json *v = parse_ok("[1, -9223372036854775808, 1.0, 1e5, 0.8]");
    assert_int_equal(lmc_json_size(v), 5);
    assert_int_equal(lmc_json_type_of(lmc_json_array_at(v, 0)), LMC_JSON_INT);
    assert_int_equal(lmc_json_get_int(lmc_json_array_at(v, 1)), INT64_MIN);
    assert_int_equal(lmc_json_type_of(lmc_json_array_at(v, 2)), LMC_JSON_FLOAT);
    assert_int_equal(lmc_json_type_of(lmc_json_array_at(v, 3)), LMC_JSON_FLOAT);
    assert_true(lmc_json_get_number(lmc_json_array_at(v, 4)) == 0.8);
    assert_dumps(v, 0, -1, "[1, -9223372036854775808, 1.0, 100000.0, 0.8]");
}

static void test_parse_keeps_object_insertion_order(void **state)
{
    (void)state;
    lmc_json *v = parse_ok("{\"z\": 1, \"a\": 2, \"m\": 3}");
    assert_string_equal(lmc_json_object_key_at(v, 0), "z");
    assert_string_equal(lmc_json_object_key_at(v, 1), "a");
    assert_string_equal(lmc_json_object_key_at(v, 2), "m");
    assert_dumps(v, 0, -1, "{\"z\": 1, \"a\": 2, \"m\": 3}");
}

static void test_parse_builds_nested_structures(void **state)
{
    (void)state;
    lmc_json *v = parse_ok("{\"b\":[1,2],\"a\":{\"y\":0.8,\"x\":true,\"z\":null},"
                           "\"c\":[[],{},[{\"d\":\"e\"}]]}");
    lmc_json *c = lmc_json_object_get(v, "c");
    assert_int_equal(lmc_json_type_of(c), LMC_JSON_ARRAY);
    lmc_json *d = lmc_json_object_get(lmc_json_array_at(lmc_json_array_at(c, 2), 0), "d");
    assert_string_equal(lmc_json_get_string(d, NULL), "e");
    assert_dumps(v, LMC_JSON_SORT_KEYS, -1,
                 "{\"a\": {\"x\": true, \"y\": 0.8, \"z\": null}, \"b\": [1, 2], "
                 "\"c\": [[], {}, [{\"d\": \"e\"}]]}");
}

static void test_parse_accepts_top_level_scalar(void **state)
{
    (void)state;
    lmc_json *v = parse_ok("  42 ");
    assert_int_equal(lmc_json_type_of(v), LMC_JSON_INT);
    assert_int_equal(lmc_json_get_int(v), 42);
    lmc_json_free(v);
}

static void test_parse_decodes_escapes_to_utf8(void **state)
{
    (void)state;
    lmc_json *v = parse_ok("\"caf\\u00e9 \\ud83d\\ude00 a\\u0000b\"");
    size_t len = 0;
    const char *s = lmc_json_get_string(v, &len);
    static const char expected[] = "caf\xc3\xa9 \xf0\x9f\x98\x80 a\0b";
    assert_int_equal(len, sizeof(expected) - 1);
    assert_memory_equal(s, expected, sizeof(expected) - 1);
    lmc_json_free(v);
}

static void test_parse_rejects_duplicate_keys(void **state)
{
    (void)state;
    const char *text = "{\"a\": 1, \"a\": 2}";
    lmc_json *v = (lmc_json *)0x1;
    lmc_error err;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, &err), LMC_ERR_FORMAT);
    assert_null(v);
    assert_int_equal(err.code, LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "duplicate object key"));
}

static void test_parse_reports_line_and_column_of_malformed_input(void **state)
{
    (void)state;
    const char *text = "{\n  \"a\": tru\n}";
    lmc_json *v = NULL;
    lmc_error err;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, &err), LMC_ERR_FORMAT);
    assert_null(v);
    assert_string_equal(err.msg, "invalid JSON at line 2 column 10: invalid token near 'tru'");
}

static void test_parse_rejects_truncated_input(void **state)
{
    (void)state;
    const char *text = "{\"a\": [1, 2";
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_ERR_FORMAT);
    assert_null(v);
}

static void test_parse_rejects_empty_input(void **state)
{
    (void)state;
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse("", 0, &v, NULL), LMC_ERR_FORMAT);
    assert_null(v);
}

static void test_parse_rejects_trailing_garbage(void **state)
{
    (void)state;
    lmc_json *v = NULL;
    lmc_error err;
    assert_int_equal(lmc_json_parse("[1, 2] x", 8, &v, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "end of file expected"));
}

static void test_parse_rejects_trailing_comma(void **state)
{
    (void)state;
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse("[1,]", 4, &v, NULL), LMC_ERR_FORMAT);
    assert_null(v);
}

static void test_parse_rejects_integer_beyond_int64(void **state)
{
    (void)state;
    lmc_json *v = NULL;
    lmc_error err;
    assert_int_equal(lmc_json_parse("9223372036854775808", 19, &v, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "too big integer"));
}

static void test_parse_reads_only_len_bytes(void **state)
{
    (void)state;
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse("[1]garbage", 3, &v, NULL), LMC_OK);
    assert_dumps(v, 0, -1, "[1]");
}

/* ---- out of memory -------------------------------------------------------- */

#if HAVE_ALLOC_HOOK
/*
 * malloc/calloc/realloc for this executable: the glibc allocator, except
 * that once armed, the fail_after'th call and every later one fail. live
 * counts blocks handed out while armed minus blocks freed while armed.
 */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static bool g_armed;
static long g_fail_after;
static long g_live;

static bool alloc_should_fail(void)
{
    if (!g_armed)
        return false;
    return g_fail_after-- <= 0;
}

void *malloc(size_t n)
{
    if (alloc_should_fail())
        return NULL;
    void *p = __libc_malloc(n);
    if (g_armed && p != NULL)
        g_live++;
    return p;
}

void *calloc(size_t n, size_t m)
{
    if (alloc_should_fail())
        return NULL;
    void *p = __libc_calloc(n, m);
    if (g_armed && p != NULL)
        g_live++;
    return p;
}

void *realloc(void *old, size_t n)
{
    if (alloc_should_fail())
        return NULL;
    void *p = __libc_realloc(old, n);
    if (g_armed && p != NULL && old == NULL)
        g_live++;
    return p;
}

void free(void *p)
{
    if (g_armed && p != NULL)
        g_live--;
    __libc_free(p);
}

static void arm(long fail_after)
{
    g_live = 0;
    g_fail_after = fail_after;
    g_armed = true;
}

static void disarm(void)
{
    g_armed = false;
}

/* Build, dump and parse; NULL or a non-OK status anywhere is a clean failure. */
static bool build_dump_parse(void)
{
    bool ok = false;
    lmc_json *v = build_nested_example();
    lmc_json *p = NULL;
    char *s = NULL;
    if (v == NULL)
        goto out;
    /* jansson does not read NaN back */
    if (lmc_json_object_set(v, "n", lmc_json_float(1.5)) != LMC_OK)
        goto out;
    size_t len;
    s = lmc_json_dumps(v, LMC_JSON_SORT_KEYS, 2, &len);
    if (s == NULL)
        goto out;
    if (lmc_json_parse(s, len, &p, NULL) != LMC_OK)
        goto out;
    ok = true;
out:
    free(s);
    lmc_json_free(p);
    lmc_json_free(v);
    return ok;
}
#endif

static void test_copy_is_deep_and_dumps_identically(void **state)
{
    (void)state;
    lmc_json *v = parse_ok("{\"b\": [1, 2.5, \"x\\u0000y\", null, true, {\"k\": []}], \"a\": {}}");
    lmc_json *c = lmc_json_copy(v);
    assert_non_null(c);
    char *sv = lmc_json_dumps(v, 0, -1, NULL);
    char *sc = lmc_json_dumps(c, 0, -1, NULL);
    assert_string_equal(sc, sv);
    /* Changing the original leaves the copy as it was. */
    assert_int_equal(lmc_json_object_set(v, "a", lmc_json_int(7)), LMC_OK);
    char *sc2 = lmc_json_dumps(c, 0, -1, NULL);
    assert_string_equal(sc2, sc);
    free(sv);
    free(sc);
    free(sc2);
    lmc_json_free(c);
    lmc_json_free(v);
    lmc_json *n = lmc_json_copy(NULL);
    assert_int_equal(lmc_json_type_of(n), LMC_JSON_NULL);
    lmc_json_free(n);
}

static void test_every_allocation_failure_is_clean_and_leak_free(void **state)
{
    (void)state;
#if HAVE_ALLOC_HOOK
    bool succeeded = false;
    for (long k = 0; k < 10000 && !succeeded; k++) {
        arm(k);
        succeeded = build_dump_parse();
        long live = g_live;
        disarm();
        if (live != 0)
            fail_msg("failing allocation %ld leaked %ld blocks", k, live);
    }
    assert_true(succeeded);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_repr_picks_shortest_round_trip_digits),
        cmocka_unit_test(test_float_repr_integral_value_ends_in_point_zero),
        cmocka_unit_test(test_float_repr_uses_exponent_below_1e_minus_4),
        cmocka_unit_test(test_float_repr_keeps_fixed_notation_down_to_1e_minus_4),
        cmocka_unit_test(test_float_repr_uses_exponent_from_1e16),
        cmocka_unit_test(test_float_repr_keeps_fixed_notation_below_1e16),
        cmocka_unit_test(test_float_repr_keeps_sign_of_negative_zero),
        cmocka_unit_test(test_float_repr_handles_largest_and_smallest_doubles),
        cmocka_unit_test(test_float_repr_spells_nan_and_infinities_like_json_module),
        cmocka_unit_test(test_float_repr_power_of_two_takes_shorter_neighbour),
        cmocka_unit_test(test_float_repr_matches_python_table),
        cmocka_unit_test(test_float_repr_truncates_into_small_buffer_and_returns_full_length),
        cmocka_unit_test(test_dumps_trace_example_sorts_keys_recursively),
        cmocka_unit_test(test_dumps_trace_example_has_lmcache_sha256),
        cmocka_unit_test(test_dumps_without_sort_keeps_insertion_order),
        cmocka_unit_test(test_dumps_indent_2_matches_python),
        cmocka_unit_test(test_dumps_compact_nested_matches_python),
        cmocka_unit_test(test_dumps_indent_0_breaks_lines_without_spaces),
        cmocka_unit_test(test_dumps_empty_containers_stay_compact_with_indent),
        cmocka_unit_test(test_dumps_scalars),
        cmocka_unit_test(test_dumps_escapes_quotes_backslashes_and_control_characters),
        cmocka_unit_test(test_dumps_escapes_non_ascii_with_lowercase_hex),
        cmocka_unit_test(test_dumps_escapes_non_bmp_as_surrogate_pair),
        cmocka_unit_test(test_dumps_escapes_each_invalid_utf8_byte_as_u00xx),
        cmocka_unit_test(test_dumps_sort_keys_uses_code_point_order),
        cmocka_unit_test(test_dumps_of_null_value_returns_null),
        cmocka_unit_test(test_object_set_replaces_existing_key_in_place),
        cmocka_unit_test(test_object_get_returns_null_for_missing_key),
        cmocka_unit_test(test_setters_report_nomem_for_null_child),
        cmocka_unit_test(test_setters_on_wrong_container_take_child_and_report_invalid),
        cmocka_unit_test(test_setters_refuse_container_as_its_own_child),
        cmocka_unit_test(test_accessors_return_defaults_for_other_types),
        cmocka_unit_test(test_stringn_keeps_embedded_nul),
        cmocka_unit_test(test_type_names_match_header),
        cmocka_unit_test(test_parse_maps_integers_to_int_and_reals_to_float),
        cmocka_unit_test(test_parse_keeps_object_insertion_order),
        cmocka_unit_test(test_parse_builds_nested_structures),
        cmocka_unit_test(test_parse_accepts_top_level_scalar),
        cmocka_unit_test(test_parse_decodes_escapes_to_utf8),
        cmocka_unit_test(test_parse_rejects_duplicate_keys),
        cmocka_unit_test(test_parse_reports_line_and_column_of_malformed_input),
        cmocka_unit_test(test_parse_rejects_truncated_input),
        cmocka_unit_test(test_parse_rejects_empty_input),
        cmocka_unit_test(test_parse_rejects_trailing_garbage),
        cmocka_unit_test(test_parse_rejects_trailing_comma),
        cmocka_unit_test(test_parse_rejects_integer_beyond_int64),
        cmocka_unit_test(test_parse_reads_only_len_bytes),
        cmocka_unit_test(test_copy_is_deep_and_dumps_identically),
        cmocka_unit_test(test_every_allocation_failure_is_clean_and_leak_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
