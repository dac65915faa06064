/* learn_slots: the reference notebook's setup (alec-tschantz/logsumexp,
 * examples/main.ipynb), trained with the core's ODE inference and Adam
 * (docs/learning.md section 4).
 *
 *   tokens x (N = 32, D = 4), clamped: one scene per step, 3 clusters
 *   slots z (K = 10, 4) and memories m (M = 3, 4): free states, inferred
 *   slot attention   E_a = -sum_n log sum_k exp(-||W_k x_n - W_q z_k||^2)
 *                    (project over neg-dist; W_k, W_q (4, 4) ~ N(0, 1)
 *                    are the parameters Adam learns, as in the notebook)
 *   Hopfield memory  E_h = -sum_k log sum_mu exp(-||z_k - m_mu||^2)
 *
 * As in the notebook: D, M, K, N; the nodes x, z, m; the two edges and
 * the parameters of the slot attention learned by Adam (lr 1e-3); each
 * step infers the states by the gradient flow (Heun, the plain integral
 * step-size controller, rtol = atol = 1e-3, t in [0, 20]) and takes one
 * Adam step with the gradient of the energy at the inferred states.
 * Where it differs (docs/learning.md says why): the similarities are
 * negative squared distances instead of dot products (the notebook's
 * energy is unbounded below), the tokens are data (the notebook's x is a
 * zero state), and the states start from small fixed noise, not zero
 * (zero is a fixed point of the flow). The energy after inference falls;
 * the trained parameters and the optimizer state are saved to a JSON
 * file, reloaded into a fresh graph, and give the same energy.
 *
 * Usage: learn_slots [out.json] [steps]   (default learn_slots.json, 300) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lsegraph/lsegraph.h>

enum { N = 32, D = 4, N_SLOT = 10, N_MEM = 3, N_SCENE = 64 };

typedef struct model {
    lse_graph *g;
    lse_node *x, *s, *m, *wk, *wq;
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

/* an approximately standard normal number from an integer (sum of 12
 * uniforms, minus 6) */
static double hash_normal(unsigned long i)
{
    double z = 0.0;
    for (unsigned long k = 0; k < 12; k++)
        z += 0.5 * (hash01(7919 * i + k) + 1.0);
    return z - 6.0;
}

static lse_status build(model *md)
{
    static lse_project_config cfg; /* must outlive the graph */
    cfg.base = lse_sim_neg_dist;
    cfg.base_config = NULL;
    lse_graph *g = md->g = lse_graph_new();
    if (g == NULL)
        return LSE_ENOMEM;
    lse_status st = lse_graph_add_node(g, "tokens", N, D, LSE_NODE_CLAMPED, &md->x);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "slots", N_SLOT, D, 0, &md->s);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "memories", N_MEM, D, 0, &md->m);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "W_k", D, D, LSE_NODE_PARAM, &md->wk);
    if (st == LSE_OK)
        st = lse_graph_add_node(g, "W_q", D, D, LSE_NODE_PARAM, &md->wq);
    if (st != LSE_OK)
        return st;
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < D; j++) {
            gsl_matrix_set(lse_node_value(md->wk), i, j, hash_normal(300 + i * D + j));
            gsl_matrix_set(lse_node_value(md->wq), i, j, hash_normal(400 + i * D + j));
        }
    lse_node *par[6] = {md->wk, md->wq, NULL, NULL, NULL, NULL};
    lse_term_spec spec = lse_term_spec_default();
    spec.child = lse_view_all(md->x);
    spec.parent = lse_view_all(md->s);
    spec.sim = lse_sim_project;
    spec.config = &cfg;
    spec.param = par;
    st = lse_graph_add_lse(g, "slot-attention", &spec, NULL);
    lse_term_spec hop = lse_term_spec_default();
    hop.child = lse_view_all(md->s);
    hop.parent = lse_view_all(md->m);
    hop.sim = lse_sim_neg_dist;
    if (st == LSE_OK)
        st = lse_graph_add_lse(g, "hopfield", &hop, NULL);
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

/* the states' start: small fixed noise (zero is a fixed point) */
static void init_slots(model *md)
{
    for (size_t i = 0; i < N_SLOT; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(lse_node_value(md->s), i, j, 0.1 * hash01(50 + i * D + j));
    for (size_t i = 0; i < N_MEM; i++)
        for (size_t j = 0; j < D; j++)
            gsl_matrix_set(lse_node_value(md->m), i, j, 0.1 * hash01(150 + i * D + j));
}

/* the reference's solver: Heun with the plain integral controller */
static lse_ode *new_inference(model *md)
{
    lse_ode *inf = lse_ode_new(md->g); /* default: the free states */
    lse_ode_opts io = lse_ode_opts_default();
    io.pcoeff = 0.0;
    io.icoeff = 1.0;
    io.dcoeff = 0.0;
    if (inf != NULL && lse_ode_set_opts(inf, &io) != LSE_OK) {
        lse_ode_free(inf);
        return NULL;
    }
    return inf;
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

static double frob(lse_node *n)
{
    const gsl_matrix *w = lse_node_value(n);
    double s2 = 0.0;
    for (size_t i = 0; i < w->size1 * w->size2; i++)
        s2 += w->data[i] * w->data[i];
    return sqrt(s2);
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
    lse_ode *inf = new_inference(&md); /* slots and memories */
    lse_optim_opts oo = lse_optim_opts_default();
    oo.rule = LSE_OPTIM_ADAM;
    oo.lr = 1e-3; /* optax.adam(1e-3) */
    lse_optim *opt = lse_optim_new(md.g, &oo); /* W_k, W_q */
    if (inf == NULL || opt == NULL)
        return die("setup", lse_graph_errmsg(md.g));

    const double wk0 = frob(md.wk), wq0 = frob(md.wq);
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
    printf("scene 0: %.4f before training, %.4f after (bound %.4f)\n", e_probe0,
           e_probe1, -(double)N * log((double)N_SLOT) - N_SLOT * log((double)N_MEM));
    printf("|W_k|_F %.4f -> %.4f, |W_q|_F %.4f -> %.4f\n", wk0, frob(md.wk), wq0,
           frob(md.wq));

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
    lse_ode *inf2 = new_inference(&md2);
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
