"""params.yaml: its typed shape (`schema`) and the check that holds a file to it (`check`)."""
