/** A named module for NamingKinds: a class whose methods are named as those of the unnamed module. */
module naming.mod {
    exports naming.mod;
}
