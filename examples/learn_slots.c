/* learn_slots: the reference notebook's setup (alec-tschantz/logsumexp),
 * trained with the core's ODE inference and Adam (docs/learning.md).
 *
 *   tokens X (N = 32, D = 4), clamped: one scene per step, 3 clusters
 *   slots  S (3, 4), free state, re-initialised every step
 *   slot attention   E_a = -sum_j log sum_i exp(-||x_j - s_i||^2)
 *   Hopfield memory  E_m = -sum_i log sum_mu exp(-||s_i - m_mu||^2)
 *   memories M (8, 4), parameters learned by Adam
 *
 * Both terms use the negative squared distance, so the energy is bounded
 * below (E >= -N log 3 - 3 log 8) jointly in the slots and the memories:
 * a dot-product Hopfield term with learned bilinear slot attention is not
 * (scaling W_K, W_Q and the slots together lowers it without bound, and
 * Adam finds that direction within a few dozen steps).
 *
 * Each step infers the slots by the gradient flow (Heun + PID,
 * rtol = atol = 1e-3, t in [0, 20]) and takes one Adam step on the
 * memories M with the gradient of the energy at the inferred
 * slots. The energy after inference falls; the trained parameters and the
 * optimizer state are saved to a JSON file, reloaded into a fresh graph,
 * and give the same energy.
 *
 * Usage: learn_slots [out.json] [steps]   (default learn_slots.json, 300) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

enum { N = 32, D = 4, N_SLOT = 3, N_MEM = 8, N_SCENE = 64 };

typedef struct model {
    lse_graph *g;
    lse_node *x, *s, *m;
} model;

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "learn_slots: %s: %s\n", what, msg);
    return 1;
}

/* a fixed pseudo-random number in [-1, 1) from an integer */
static double hash01(unsigned long i)
{
    unsigned long long z = (unsigned long long)i * 0x9e3779b97f4a7c15ULL + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0;
}

static lse_status build(model *md)
{
    lse_graph *g = md->g = lse_graph_new();
    if (g == NULL)
        return LSE_ENOMEM;
    lse_status st = lse_graph_add_node(g, "tokens", N, D, LSE_NODE_CLAMPED, &md->x);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "slots", N_SLOT, D, 0, &md->s);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "memories", N_MEM, D, LSE_NODE_PARAM, &md->m);
    if (st != LSE_OK)
        return st;
    for (size_t i = 0; i < N_MEM; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(lse_node_value(md->m), i, j, 0.3 * hash01(300 + i * D + j));
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(md->x);
    spec.parent = lse_view_all(md->s);
    spec.sim = lse_sim_neg_dist;
    st = lse_graph_add_lse(g, "slot-attention", &spec, NULL);
    spec.child = lse_view_all(md->s);
    spec.parent = lse_view_all(md->m);
    if (st == LSE_OK)
        st = lse_graph_add_lse(g, "hopfield", &spec, NULL);
    return st;
}

/* scenes: N tokens around 3 of 5 cluster centres, one scene per row */
static gsl_matrix *make_scenes(void)
{
    gsl_matrix *sc = gsl_matrix_alloc(N_SCENE, N * D);
    if (sc == NULL)
        return NULL;
    for (size_t s = 0; s < N_SCENE; s++)
        for (size_t t = 0; t < N; t++) {
            const size_t c = (s + t % 3 * (1 + s % 2)) % 5; /* cluster */
            for (size_t j = 0; j < D; j++) {
                const double centre = 2.0 * cos(1.7 * (double)c + 2.1 * (double)j);
                gsl_matrix_set(sc, s, t * D + j,
                               centre + 0.25 * hash01(1000 + (s * N + t) * D + j));
            }
        }
    return sc;
}

static void init_slots(model *md)
{
    for (size_t i = 0; i < N_SLOT; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(lse_node_value(md->s), i, j, 0.1 * hash01(50 + i * D + j));
}

/* load scene rows of the batcher into the tokens node ((1, N D) view) */
static lse_status load_scene(const lse_batcher *b, const gsl_matrix *scenes, model *md)
{
    gsl_matrix_view flat = gsl_matrix_view_array(lse_node_value(md->x)->data, 1, N * D);
    return lse_batcher_gather(b, scenes, &flat.matrix);
}

/* energy after inference on scene 0 */
static lse_status probe(model *md, const gsl_matrix *scenes, lse_ode *inf, double *e)
{
    gsl_matrix_const_view row = gsl_matrix_const_submatrix(scenes, 0, 0, 1, N * D);
    gsl_matrix_view flat = gsl_matrix_view_array(lse_node_value(md->x)->data, 1, N * D);
    gsl_matrix_memcpy(&flat.matrix, &row.matrix);
    init_slots(md);
    lse_status st = lse_ode_run(inf, NULL);
    if (st == LSE_OK)
        st = lse_graph_energy(md->g, e);
    return st;
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "learn_slots.json";
    long steps = 300;
    if (argc > 2) {
        char *end;
        errno = 0;
        steps = strtol(argv[2], &end, 10);
        if (errno != 0 || *end != '\0' || steps < 20 || steps > 100000)
            return die("option 'steps'", "want an integer in 20..100000; "
                                         "usage: learn_slots [out.json] [steps]");
    }
    model md;
    memset(&md, 0, sizeof md);
    if (build(&md) != LSE_OK)
        return die("build", lse_graph_errmsg(md.g));
    gsl_matrix *scenes = make_scenes();
    lse_batcher *b = NULL;
    lse_error err;
    if (scenes == NULL || lse_batcher_new(N_SCENE, 1, 7, 1, &b, &err) != LSE_OK)
        return die("batcher", "out of memory");
    lse_ode *inf = lse_ode_new(md.g); /* default: the free state = slots */
    lse_optim_opts oo = lse_optim_opts_default();
    oo.rule = LSE_OPTIM_ADAM;
    oo.lr = 0.02;
    lse_optim *opt = lse_optim_new(md.g, &oo); /* the memories */
    if (inf == NULL || opt == NULL)
        return die("setup", lse_graph_errmsg(md.g));

    double e_probe0, first = 0.0, last = 0.0;
    if (probe(&md, scenes, inf, &e_probe0) != LSE_OK)
        return die("inference", lse_graph_errmsg(md.g));
    const long win = 20;
    printf("step  energy-after-inference  ode-steps\n");
    for (long k = 0; k < steps; k++) {
        double e;
        if (lse_batcher_next(b) != LSE_OK || load_scene(b, scenes, &md) != LSE_OK)
            return die("batch", "cannot load a scene");
        init_slots(&md);
        if (lse_learn_step(inf, opt, &e) != LSE_OK)
            return die("learn step", lse_graph_errmsg(md.g));
        if (k < win)
            first += e / (double)win;
        if (k >= steps - win)
            last += e / (double)win;
        if (k % 50 == 0 || k == steps - 1)
            printf("%4ld  %22.6f  %9zu\n", k, e, lse_ode_n_accepted(inf));
    }
    double e_probe1;
    if (probe(&md, scenes, inf, &e_probe1) != LSE_OK)
        return die("inference", lse_graph_errmsg(md.g));
    printf("mean energy after inference: first %ld steps %.4f, last %ld steps "
           "%.4f\n",
           win, first, win, last);
    printf("scene 0: %.4f before training, %.4f after\n", e_probe0, e_probe1);

    /* save, reload into a fresh graph, compare */
    lse_json *doc = lse_json_new_object();
    if (doc == NULL || lse_optim_save_json(opt, doc, &err) != LSE_OK ||
        lse_json_save(doc, out, &err) != LSE_OK)
        return die(out, err.message);
    lse_json_free(doc);
    model md2;
    memset(&md2, 0, sizeof md2);
    if (build(&md2) != LSE_OK)
        return die("build", lse_graph_errmsg(md2.g));
    lse_optim *opt2 = lse_optim_new(md2.g, &oo);
    lse_ode *inf2 = lse_ode_new(md2.g);
    if (opt2 == NULL || inf2 == NULL)
        return die("setup", "out of memory");
    if (lse_json_load(out, &doc, &err) != LSE_OK ||
        lse_optim_load_json(opt2, doc, &err) != LSE_OK)
        return die(out, err.message);
    lse_json_free(doc);
    double e_probe2;
    if (probe(&md2, scenes, inf2, &e_probe2) != LSE_OK)
        return die("inference", lse_graph_errmsg(md2.g));
    printf("saved to %s and reloaded: scene 0 energy %.4f (%s)\n", out, e_probe2,
           e_probe2 == e_probe1 ? "identical" : "DIFFERENT");
    const int ok = last < first && e_probe1 < e_probe0 && e_probe2 == e_probe1 &&
                   lse_optim_n_step(opt2) == (size_t)steps;
    lse_ode_free(inf2);
    lse_optim_free(opt2);
    lse_graph_free(md2.g);
    lse_ode_free(inf);
    lse_optim_free(opt);
    lse_batcher_free(b);
    gsl_matrix_free(scenes);
    lse_graph_free(md.g);
    if (!ok)
        return die("check", "the energy did not fall or the reload differs");
    return 0;
}
