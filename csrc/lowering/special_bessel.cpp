// Bessel functions J0, J1, Y0, Y1 and K0, K1 (also exp(x) K0, exp(x) K1), Airy
// Ai and the Hurwitz zeta function, as torch.special computes them on the CPU
// (Cephes): J and Y are rational functions of x^2 up to x = 5 and Hankel's
// asymptotic form with rational amplitudes past it; K is a Chebyshev series in
// x^2 up to 2 (with log(x/2) times I0 or I1) and in 8/x past it; Ai is its
// power series in x^3 on (-2.09, 2.09) and asymptotic rational forms outside;
// zeta sums its terms directly, then adds Euler-Maclaurin corrections. Every
// piece is computed for every element and the right one selected; the CPU's
// loops that stop on convergence are unrolled with a per-element stop mask (a
// stablehlo.while where their length depends on the input: zeta at negative
// q). PyTorch has these kernels for float and double only: each computes in
// its own type, as the CPU does, but for zeta, whose float kernel sums in
// double: float32 zeta sums in float here (within float32's tolerance except
// at negative q, where terms of both signs cancel).
#include <cfloat>
#include <cmath>

#include "lowering/common.h"
#include "lowering/registry.h"
#include "lowering/series.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Values = std::vector<Value>;

const double kSqrt2OverPi = 0.797884560802865355879892119868763737;  // sqrt(2 / pi)
const double k2OverPi = 0.636619772367581343075535053490057448;

// ---- coefficient tables (Cephes, as PyTorch's Math.h). J0/Y0 and J1/Y1 share
// their asymptotic amplitudes (P = PP/PQ, Q = QP/QQ); R are J's small-x
// rationals, Y (P/Q) Y's; A and B are K's Chebyshev series below and above 2;
// Ai's N/D pairs are its asymptotic rationals for x >= 2.09 (no suffix) and
// x <= -2.09 (F for the sine part, G for the cosine part).

const double kJ0PP[] = {
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
    5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
    9.99999999999999997821e-01};
const double kJ0PQ[] = {
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
    5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
    1.00000000000000000218e+00};
const double kJ0QP[] = {
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00};
const double kJ0QQ[] = {
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
    7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
    2.42005740240291393179e+02};
const double kJ0RP[] = {
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
    9.70862251047306323952e+15};
const double kJ0RQ[] = {
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
    1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
    3.18121955943204943306e+16, 1.71086294081043136091e+18};
const double kJ1PP[] = {
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
    5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
    1.00000000000000000254e+00};
const double kJ1PQ[] = {
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
    5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
    9.99999999999999997461e-01};
const double kJ1QP[] = {
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
    3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
    2.11688757100572135698e+02, 2.52070205858023719784e+01};
const double kJ1QQ[] = {
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
    9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
    3.36093607810698293419e+02};
const double kJ1RP[] = {
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
    3.68295732863852883286e+15};
const double kJ1RQ[] = {
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
    2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
    8.95222336184627338078e+16, 5.32278620332680085395e+18};
const double kY0P[] = {
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
    -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
    4.42733268572569800351e+16, -1.84950800436986690637e+16};
const double kY0Q[] = {
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
    8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
    2.50596256172653059228e+17};
const double kY1P[] = {
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
    -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17};
const double kY1Q[] = {
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
    1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
    6.87141087355300489866e+16, 3.97270608116560655612e+18};
const double kK0A[] = {
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01};
const double kK0B[] = {
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
    6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
    2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00};
const double kK1A[] = {
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00};
const double kK1B[] = {
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
    1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
    3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
    2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
    1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00};
const double kAiN[] = {
    3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
    1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
    1.40264691163389668864e+01, 9.99999999999999995305e-01};
const double kAiD[] = {
    5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
    1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
    1.40959135607834029598e+01, 1.00000000000000000470e+00};
const double kAiFN[] = {
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
const double kAiFD[] = {
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
    9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
    4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07};
const double kAiGN[] = {
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
    9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
    5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
    8.11789239554389293311e-08, 3.41551784765923618484e-10};
const double kAiGD[] = {
    9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
    5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
    4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
    4.91834570062930015649e-09};

Value full_bool(Builder& b, bool v, const Value& like) { return b.full(v ? 1 : 0, E::Bool, like.shape()); }

// The constant v, hidden from XLA's simplifier: it turns a division by a
// constant into a multiplication by its rounded reciprocal, which is off by an
// ulp where PyTorch divides.
Value opaque_splat(Builder& b, double v, const Value& like) {
  Value c = splat(b, v, like);
  return b.op_multi("stablehlo.optimization_barrier", {c}, {c.type}, "", {})[0];
}

// ---- J and Y

// Hankel's form past x = 5: sqrt(2 / (pi x)) (P cos(x - phase) - (5/x) Q sin(x - phase))
// for J, (P sin + (5/x) Q cos) for Y, P and Q rational in w = (5/x)^2.
struct Hankel {
  const double *pp, *pq, *qp, *qq;
  double phase;
};
const Hankel kOrder0 = {kJ0PP, kJ0PQ, kJ0QP, kJ0QQ, 0.785398163397448309615660845819875721};
const Hankel kOrder1 = {kJ1PP, kJ1PQ, kJ1QP, kJ1QQ, 2.356194490192344928846982537459627163};

Value hankel(Builder& b, Value x, Value w, const Hankel& h, bool second_kind) {
  Value p = b.div(polevl(b, w, h.pp, 6), polevl(b, w, h.pq, 6));
  Value q = b.mul(b.div(splat(b, 5, x), x), b.div(polevl(b, w, h.qp, 7), polevl(b, w, h.qq, 6)));
  Value arg = b.sub(x, splat(b, h.phase, x));
  Value s = b.sine(arg), c = b.cosine(arg);
  Value v = second_kind ? b.add(b.mul(p, s), b.mul(q, c)) : b.sub(b.mul(p, c), b.mul(q, s));
  return b.div(b.mul(v, splat(b, kSqrt2OverPi, x)), b.sqrt(x));
}
// PyTorch forms (5/x)^2 as 25 / x^2 for order 0 and as (5/x) (5/x) for order 1.
Value w0(Builder& b, Value x) { return b.div(splat(b, 25, x), b.mul(x, x)); }
Value w1(Builder& b, Value x) {
  Value r = b.div(splat(b, 5, x), x);
  return b.mul(r, r);
}

// J0 for 0 <= x <= 5: 1 - x^2/4 below 1e-5, else (x^2 - r1)(x^2 - r2) R(x^2)
// (r1, r2 the squares of its first two zeros).
Value j0_small(Builder& b, Value x) {
  Value x2 = b.mul(x, x);
  Value r = b.mul(b.mul(b.sub(x2, splat(b, 5.78318596294678452118e+00, x)),
                        b.sub(x2, splat(b, 3.04712623436620863991e+01, x))),
                  polevl(b, x2, kJ0RP, 3));
  r = b.div(r, polevl(b, x2, kJ0RQ, 7));
  Value tiny = b.sub(splat(b, 1, x), b.div(x2, splat(b, 4, x)));
  return b.select(lt(b, x, 0.00001), tiny, r);
}

// J1 for 0 <= x <= 5: x (x^2 - r1)(x^2 - r2) R(x^2).
Value j1_small(Builder& b, Value x) {
  Value x2 = b.mul(x, x);
  Value r = b.mul(b.div(polevl(b, x2, kJ1RP, 3), polevl(b, x2, kJ1RQ, 7)), x);
  r = b.mul(r, b.sub(x2, splat(b, 1.46819706421238932572e+01, x)));
  return b.mul(r, b.sub(x2, splat(b, 4.92184563216946036703e+01, x)));
}

Value j0_impl(Builder& b, Value x) {
  Value ax = b.abs(x);
  return b.select(le(b, ax, 5), j0_small(b, ax), hankel(b, ax, w0(b, ax), kOrder0, false));
}

// Odd: -J1(-x) below 0.
Value j1_impl(Builder& b, Value x) {
  Value ax = b.abs(x);
  Value r = b.select(le(b, ax, 5), j1_small(b, ax), hankel(b, ax, w1(b, ax), kOrder1, false));
  return b.select(lt(b, x, 0), b.neg(r), r);
}

// Y0 up to 5: Y(x^2) + (2/pi) log(x) J0(x); -inf at 0, NaN below.
Value y0_impl(Builder& b, Value x) {
  Value x2 = b.mul(x, x);
  Value small = b.add(b.div(polevl(b, x2, kY0P, 7), polevl(b, x2, kY0Q, 6)),
                      b.mul(b.mul(splat(b, k2OverPi, x), b.log(x)), j0_small(b, x)));
  Value r = b.select(le(b, x, 5), small, hankel(b, x, w0(b, x), kOrder0, true));
  r = b.select(lt(b, x, 0), splat(b, NAN, x), r);
  return b.select(eq(b, x, 0), splat(b, -INFINITY, x), r);
}

// Y1 up to 5: x Y(x^2) + (2/pi) (J1(x) log(x) - 1/x); -inf at 0, NaN below.
Value y1_impl(Builder& b, Value x) {
  Value x2 = b.mul(x, x);
  Value rat = b.mul(x, b.div(polevl(b, x2, kY1P, 5), polevl(b, x2, kY1Q, 7)));
  Value small = b.add(rat, b.mul(splat(b, k2OverPi, x),
                                 b.sub(b.mul(j1_small(b, x), b.log(x)), recip(b, x))));
  Value r = b.select(le(b, x, 5), small, hankel(b, x, w1(b, x), kOrder1, true));
  r = b.select(lt(b, x, 0), splat(b, NAN, x), r);
  return b.select(eq(b, x, 0), splat(b, -INFINITY, x), r);
}

// ---- K

// K0 (Scaled: exp(x) K0) for x > 0; +inf at 0, NaN below. Past 2 the series
// in 8/x gives exp(x) sqrt(x) K0.
template <bool Scaled>
Value k0_impl(Builder& b, Value x) {
  Value cheb = chbevl(b, b.sub(b.mul(x, x), splat(b, 2, x)), kK0A, 10);
  Value i0 = b.mul(b.exp(x), bessel_i0e(b, x));
  Value small = b.sub(cheb, b.mul(b.log(b.mul(splat(b, 0.5, x), x)), i0));
  Value big = chbevl(b, b.sub(b.div(splat(b, 8, x), x), splat(b, 2, x)), kK0B, 25);
  if (Scaled) {
    small = b.mul(small, b.exp(x));
  } else {
    big = b.mul(b.exp(b.neg(x)), big);
  }
  Value r = b.select(le(b, x, 2), small, b.div(big, b.sqrt(x)));
  r = b.select(lt(b, x, 0), splat(b, NAN, x), r);
  return b.select(eq(b, x, 0), splat(b, INFINITY, x), r);
}

// K1 likewise: log(x/2) I1(x) + A(x^2)/x up to 2.
template <bool Scaled>
Value k1_impl(Builder& b, Value x) {
  Value cheb = chbevl(b, b.sub(b.mul(x, x), splat(b, 2, x)), kK1A, 11);
  Value i1 = b.mul(b.exp(x), bessel_i1e(b, x));
  Value small = b.add(b.mul(b.log(b.mul(splat(b, 0.5, x), x)), i1), b.div(cheb, x));
  Value big = chbevl(b, b.sub(b.div(splat(b, 8, x), x), splat(b, 2, x)), kK1B, 25);
  if (Scaled) {
    small = b.mul(small, b.exp(x));
  } else {
    big = b.mul(b.exp(b.neg(x)), big);
  }
  Value r = b.select(le(b, x, 2), small, b.div(big, b.sqrt(x)));
  r = b.select(lt(b, x, 0), splat(b, NAN, x), r);
  return b.select(eq(b, x, 0), splat(b, INFINITY, x), r);
}

// ---- Airy Ai

// The Maclaurin series Ai(x) = c1 f(x) - c2 g(x), f and g power series in
// x^3, summed until a term of f falls under the type's epsilon relative to f
// (at most 10 terms in float, 14 in double on |x| < 2.09).
Value airy_series(Builder& b, Value x) {
  bool f64 = x.dtype() == E::F64;
  double eps = f64 ? DBL_EPSILON : FLT_EPSILON;
  int terms = f64 ? 16 : 12;
  Value z = b.mul(b.mul(x, x), x);
  Value f = splat(b, 1, x), g = x, m = f, n = x;
  Value going = full_bool(b, true, x);
  for (int j = 1; j <= terms; ++j) {
    // m_j = m_{j-1} z / ((3j - 1) 3j), n_j = n_{j-1} z / (3j (3j + 1)).
    Value nm = b.div(b.div(b.mul(m, z), splat(b, 3 * j - 1, x)), splat(b, 3 * j, x));
    Value nn = b.div(b.div(b.mul(n, z), splat(b, 3 * j, x)), splat(b, 3 * j + 1, x));
    Value nf = b.add(f, nm), ng = b.add(g, nn);
    m = b.select(going, nm, m);
    n = b.select(going, nn, n);
    f = b.select(going, nf, f);
    g = b.select(going, ng, g);
    going = b.and_(going, gt(b, b.abs(b.div(nm, nf)), eps));
  }
  return b.sub(b.mul(splat(b, 0.355028053887817239260, x), f),
               b.mul(splat(b, 0.258819403792806798405, x), g));
}

Value airy_ai_impl(Builder& b, Value x) {
  const double c = 5.64189583547756286948e-01;  // 1 / sqrt(pi)
  // x <= -2.09: zeta = (2/3) (-x)^(3/2), z = 1/zeta,
  // Ai = c (-x)^(-1/4) (sin(zeta + pi/4) (1 + z^2 F(z^2)) - cos(zeta + pi/4) z G(z^2)).
  Value nx = b.neg(x);
  Value zn = b.div(b.mul(b.mul(splat(b, -2, x), x), b.sqrt(nx)), opaque_splat(b, 3, x));
  Value z = recip(b, zn), zz = b.mul(z, z);
  Value t = b.add(zn, splat(b, 0.25 * kPi, x));
  Value fsum = b.add(splat(b, 1, x), b.div(b.mul(zz, polevl(b, zz, kAiFN, 8)), polevl(b, zz, kAiFD, 8)));
  Value gsum = b.div(b.mul(z, polevl(b, zz, kAiGN, 10)), polevl(b, zz, kAiGD, 9));
  Value osc = b.sub(b.mul(b.sine(t), fsum), b.mul(b.cosine(t), gsum));
  Value neg = b.mul(b.div(splat(b, c, x), b.sqrt(b.sqrt(nx))), osc);
  // x >= 2.09: Ai = c N(1/zeta) / D(1/zeta) / (2 x^(1/4) exp(zeta)).
  Value zp = b.div(b.mul(b.mul(splat(b, 2, x), x), b.sqrt(x)), opaque_splat(b, 3, x));
  Value iz = recip(b, zp);
  Value ratio = b.div(polevl(b, iz, kAiN, 7), polevl(b, iz, kAiD, 7));
  Value pos = b.div(b.mul(splat(b, c, x), ratio),
                    b.mul(b.mul(splat(b, 2, x), b.sqrt(b.sqrt(x))), b.exp(zp)));
  Value r = b.select(ge(b, x, 2.09), pos, airy_series(b, x));
  r = b.select(lt(b, x, -2.09), neg, r);
  r = b.select(gt(b, x, 103.892), splat(b, 0, x), r);
  return b.select(is_inf(b, x), splat(b, NAN, x), r);
}

// ---- Hurwitz zeta

const double kMachEp = 1.11022302462515654042E-16;  // PyTorch's, whatever the type

// a^-x where a < 0 only when x is an integer (other negative q are NaN).
Value pow_neg(Builder& b, Value a, Value x) {
  Value p = b.pow(b.abs(a), b.neg(x));
  Value odd = eq(b, b.abs(b.rem(x, splat(b, 2, x))), 1);
  return b.select(b.and_(lt(b, a, 0), odd), b.neg(p), p);
}

// The direct sum's state: a (q + terms so far), the last term, the sum, and
// whether the sum has converged (the last term under MACHEP of the sum).
struct ZetaSum {
  Value a, term, s, done;
};

// One step of the direct sum where `active`.
ZetaSum zeta_step(Builder& b, const ZetaSum& st, Value x, Value active) {
  Value a = b.add(st.a, splat(b, 1, x));
  Value term = pow_neg(b, a, x);
  Value s = b.add(st.s, term);
  Value tiny = b.and_(b.compare(b.mul(splat(b, -kMachEp, s), s), term, Compare::LT),
                      b.compare(term, b.mul(splat(b, kMachEp, s), s), Compare::LT));
  return {b.select(active, a, st.a), b.select(active, term, st.term), b.select(active, s, st.s),
          b.or_(st.done, b.and_(active, tiny))};
}

// How many steps past the first nine the direct sum may take (it runs until
// q + steps > 9: about -q steps for negative q; q below about -2^20 stops
// short, where the CPU would take as many steps).
const int64_t kZetaMaxSteps = int64_t(1) << 20;

Value zeta_impl(Builder& b, Value x, Value q) {
  // Poles at q = 0, -1, ...; other q <= 0 need an integer x; x < 1 diverges.
  // These sum nothing (q = -inf would never reach 9).
  Value q_neg = le(b, q, 0);
  Value x_frac = b.compare(x, b.floor(x), Compare::NE);
  Value pole = b.and_(q_neg, b.compare(q, b.floor(q), Compare::EQ));
  Value undefined = b.or_(lt(b, x, 1), b.and_(q_neg, x_frac));
  Value special = b.or_(b.or_(eq(b, x, 1), pole), undefined);
  ZetaSum st{q, splat(b, 0, q), pow_neg(b, q, x), special};
  // Nine steps always (unless converged), then on while q + steps <= 9.
  for (int i = 0; i < 9; ++i) st = zeta_step(b, st, x, b.not_(st.done));
  Value count = b.constant_int(0, E::I32);
  Values out = while_loop(
      b, {count, st.a, st.term, st.s, st.done, x},
      [](Builder& r, const Values& v) {
        Value active = r.and_(r.not_(v[4]), le(r, v[1], 9));
        Value more = r.compare(v[0], r.constant_int(kZetaMaxSteps, E::I32), Compare::LT);
        return Values{r.and_(more, any_nonzero(r, active))};
      },
      [](Builder& r, const Values& v) {
        Value active = r.and_(r.not_(v[4]), le(r, v[1], 9));
        ZetaSum next = zeta_step(r, {v[1], v[2], v[3], v[4]}, v[5], active);
        return Values{r.add(v[0], r.constant_int(1, E::I32)), next.a, next.term, next.s, next.done,
                      v[5]};
      });
  Value w = out[1], term = out[2], s = out[3], done = out[4];
  // Euler-Maclaurin: the integral of the tail, half the last term, and up to
  // twelve corrections B_(2i+2) / (2i+2)! x (x+1) ... (x+2i) w^-(x+2i+1),
  // stopping once one falls under MACHEP of the sum. PyTorch computes float's
  // in double: in float the rising product times the power is kept as one
  // number (x + k) / w at a time, so that neither overflows nor underflows alone.
  bool f64 = x.dtype() == E::F64;
  Value em = b.add(s, b.div(b.mul(term, w), b.sub(x, splat(b, 1, x))));
  em = b.sub(em, b.mul(splat(b, 0.5, x), term));
  Value rising = splat(b, 1, x), product = term;
  Value stop = full_bool(b, false, x);
  for (int i = 0; i < 12; ++i) {
    Value t;
    for (int half = 0; half < 2; ++half) {
      Value factor = b.add(x, splat(b, 2 * i + half, x));
      if (f64) {
        rising = b.mul(rising, factor);
        term = b.div(term, w);
      } else {
        product = b.div(b.mul(product, factor), w);
      }
      if (half == 0) {
        t = b.div(f64 ? b.mul(rising, term) : product, splat(b, kZetaEulerMaclaurin[i], x));
      }
    }
    Value next = b.add(em, t);
    em = b.select(stop, em, next);
    stop = b.or_(stop, lt(b, b.abs(b.div(t, next)), kMachEp));
  }
  Value r = b.select(done, s, em);
  r = b.select(b.and_(q_neg, x_frac), splat(b, NAN, x), r);
  r = b.select(pole, splat(b, INFINITY, x), r);
  r = b.select(lt(b, x, 1), splat(b, NAN, x), r);
  return b.select(eq(b, x, 1), splat(b, INFINITY, x), r);
}

constexpr char kAiryAi[] = "airy_ai_cpu";
constexpr char kBesselJ0[] = "bessel_j0_cpu";
constexpr char kBesselJ1[] = "bessel_j1_cpu";
constexpr char kBesselY0[] = "bessel_y0_cpu";
constexpr char kBesselY1[] = "bessel_y1_cpu";
constexpr char kModifiedBesselK0[] = "modified_bessel_k0_cpu";
constexpr char kModifiedBesselK1[] = "modified_bessel_k1_cpu";
constexpr char kScaledModifiedBesselK0[] = "scaled_modified_bessel_k0_cpu";
constexpr char kScaledModifiedBesselK1[] = "scaled_modified_bessel_k1_cpu";
constexpr char kZeta[] = "zeta_cpu";

}  // namespace

TPU_LOWERING("aten::special_airy_ai", float_double_unary<airy_ai_impl, kAiryAi>);
TPU_LOWERING("aten::special_bessel_j0", float_double_unary<j0_impl, kBesselJ0>);
TPU_LOWERING("aten::special_bessel_j1", float_double_unary<j1_impl, kBesselJ1>);
TPU_LOWERING("aten::special_bessel_y0", float_double_unary<y0_impl, kBesselY0>);
TPU_LOWERING("aten::special_bessel_y1", float_double_unary<y1_impl, kBesselY1>);
TPU_LOWERING("aten::special_modified_bessel_k0", float_double_unary<k0_impl<false>, kModifiedBesselK0>);
TPU_LOWERING("aten::special_modified_bessel_k1", float_double_unary<k1_impl<false>, kModifiedBesselK1>);
TPU_LOWERING("aten::special_scaled_modified_bessel_k0",
             float_double_unary<k0_impl<true>, kScaledModifiedBesselK0>);
TPU_LOWERING("aten::special_scaled_modified_bessel_k1",
             float_double_unary<k1_impl<true>, kScaledModifiedBesselK1>);
TPU_LOWERING("aten::special_zeta", float_double_binary<zeta_impl, kZeta>);
TPU_LOWERING("aten::special_zeta.other_scalar", float_double_binary<zeta_impl, kZeta>);
TPU_LOWERING("aten::special_zeta.self_scalar", float_double_binary<zeta_impl, kZeta>);

}  // namespace torch_tpu::lowering
