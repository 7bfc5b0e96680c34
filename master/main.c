#include "mkv.h"
int main(void){return 0;}
